// The CUDA embedding gather against Embedding::lookup: every output bit equal for dense and GGUF-quantized
// tables, f32 and bf16 outputs, host and device ids; ids outside the vocabulary refused by name (host ids before
// any CUDA call, device ids after the kernel). Refusals are host-only and run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "layers/embedding.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::expect_error;
using testing::fake_cuda_view;

TEST(EmbeddingCuda, RefusesNamingTheArgument) {
  const QuantMatrix table{nullptr, QuantType::Q6_K, 100, 256, 210, 0};
  const int32_t host_ids[3] = {0, 99, 5};
  TensorView ids = TensorView::contiguous(const_cast<int32_t*>(host_ids), DType::i32, {3});
  const TensorView out = fake_cuda_view(DType::f32, {3, 256});
  EXPECT_NO_THROW(check_embedding_lookup_cuda(table, Device::cuda(), ids, out, 1.f));
  EXPECT_NO_THROW(check_embedding_lookup_cuda(table, Device::cuda(), fake_cuda_view(DType::i32, {3}), out, 1.f));
  EXPECT_NO_THROW(check_embedding_table_cuda(table));
  QuantMatrix q5 = table;
  q5.type = QuantType::Q5_K;
  expect_error<ArgumentError>([&] { check_embedding_table_cuda(q5); }, "embedding: the CUDA lookup reads");
  QuantMatrix grouped = table;
  grouped.row_group = 16;
  expect_error<ArgumentError>([&] { check_embedding_table_cuda(grouped); }, "embedding: rows regrouped");

  const int32_t bad_ids[3] = {0, 100, 5};
  expect_error<ArgumentError>(
      [&] {
        check_embedding_lookup_cuda(table, Device::cuda(),
                                    TensorView::contiguous(const_cast<int32_t*>(bad_ids), DType::i32, {3}), out, 1.f);
      },
      "ids: entry 1 = 100 is outside the vocabulary [0, 100)");
  const int32_t negative[3] = {0, 1, -2};
  expect_error<ArgumentError>(
      [&] {
        check_embedding_lookup_cuda(table, Device::cuda(),
                                    TensorView::contiguous(const_cast<int32_t*>(negative), DType::i32, {3}), out, 1.f);
      },
      "ids: entry 2 = -2 is outside");
  expect_error<DTypeError>(
      [&] { check_embedding_lookup_cuda(table, Device::cuda(), fake_cuda_view(DType::i64, {3}), out, 1.f); },
      "ids: must be int32");
  expect_error<ArgumentError>(
      [&] { check_embedding_lookup_cuda(table, Device::cuda(), fake_cuda_view(DType::i32, {3}, Device::cuda(1)), out, 1.f); },
      "ids: lives on cuda:1");
  expect_error<ArgumentError>(
      [&] { check_embedding_lookup_cuda(table, Device::cuda(), fake_cuda_view(DType::i32, {3, 1}), out, 1.f); },
      "ids: expected a contiguous [tokens]");
  TensorView host_out = out;
  host_out.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_embedding_lookup_cuda(table, Device::cuda(), ids, host_out, 1.f); },
                              "out: lives on cpu");
  expect_error<DTypeError>(
      [&] { check_embedding_lookup_cuda(table, Device::cuda(), ids, fake_cuda_view(DType::f16, {3, 256}), 1.f); },
      "out: must be float32 or bfloat16");
  expect_error<ArgumentError>(
      [&] { check_embedding_lookup_cuda(table, Device::cuda(), ids, fake_cuda_view(DType::f32, {3, 255}), 1.f); },
      "out: expected [3, 256]");
  expect_error<ArgumentError>([&] { check_embedding_lookup_cuda(table, Device::cuda(), ids, out, NAN); },
                              "scale: must be finite");
}

#if ATTNZOO_WITH_CUDA

class EmbeddingCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

void check_lookup(QuantType type, int64_t V, int64_t D, bool bf16_out, float scale, bool device_ids) {
  SCOPED_TRACE(std::string(quant_type_name(type)) + (bf16_out ? " bf16 out" : " f32 out") + " scale " +
               std::to_string(scale) + (device_ids ? " device ids" : " host ids"));
  const std::vector<uint8_t> raw = testing::random_quant_rows(type, V, D, 7);
  const Embedding e = Embedding::from_quantized(raw.data(), raw.size(), type, V, D, "token_embd.weight");
  const EmbeddingCuda g(e, Device::cuda());
  const int64_t T = 77;
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t((t * 7919 + 3) % V);
  ids[0] = int32_t(V - 1);
  DeviceBuffer dev_ids(Device::cuda(), ids.size() * 4);
  dev_ids.upload(ids.data(), ids.size() * 4);
  TensorView id_view = TensorView::contiguous(device_ids ? dev_ids.data() : ids.data(), DType::i32, {T});
  if (device_ids) id_view.device = Device::cuda();
  testing::DeviceOperand out(bf16_out ? DType::bf16 : DType::f32, {T, D}, 0, {D + 4, 1});
  g.lookup(id_view, out.device_view(), scale);
  out.download();
  synchronize(current_stream());
  std::vector<float> want(size_t(T * D));
  e.lookup(ids.data(), T, want.data(), scale);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) {
      const float w = bf16_out ? bf16_to_f32(f32_to_bf16(want[size_t(t * D + i)])) : want[size_t(t * D + i)];
      ASSERT_EQ(out.at(t * (D + 4) + i), w) << "token " << t << " element " << i;
    }
  EXPECT_TRUE(out.outside_untouched());
}

TEST_F(EmbeddingCudaGpu, MatchesTheCpuLookupBitForBit) {
  for (QuantType type : {QuantType::F32, QuantType::BF16, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0,
                         QuantType::Q4_K, QuantType::Q6_K})
    for (bool bf16_out : {false, true}) {
      check_lookup(type, 1000, 512, bf16_out, 1.f, true);
      check_lookup(type, 333, 256, bf16_out, 48.f, false);
    }
}

TEST_F(EmbeddingCudaGpu, DeviceIdsOutsideTheVocabularyAreRefused) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q8_0, 10, 64, 1);
  const EmbeddingCuda g(Embedding::from_quantized(raw.data(), raw.size(), QuantType::Q8_0, 10, 64, "e"), Device::cuda());
  const int32_t ids[4] = {1, 2, 10, -1};
  DeviceBuffer dev_ids(Device::cuda(), sizeof ids);
  dev_ids.upload(ids, sizeof ids);
  TensorView id_view = TensorView::contiguous(dev_ids.data(), DType::i32, {4});
  id_view.device = Device::cuda();
  testing::DeviceOperand out(DType::f32, {4, 64}, 0);
  expect_error<ArgumentError>([&] { g.lookup(id_view, out.device_view()); },
                              "ids: entry 2 = 10 is outside the vocabulary [0, 10)");
  g.lookup(id_view, out.device_view(), 1.f, /*check_ids=*/false);  // a step's call: NaN rows, no error
  out.download();
  synchronize(current_stream());
  EXPECT_TRUE(std::isnan(out.at(2 * 64)) && std::isnan(out.at(3 * 64 + 63)));
  EXPECT_FALSE(std::isnan(out.at(0)));
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
