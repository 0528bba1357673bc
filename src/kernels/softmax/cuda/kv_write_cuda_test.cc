// The CUDA paged KV write through the entries (write_kv_paged / write_paged_rows with device tensors) against the
// same entries on the host: every cache byte and scale bit-identical, padding and unwritten slots included, for
// every row dtype into every cache dtype, head-major rows and MLA's latent rows, skipped slots; a slot past the
// cache refused by name with nothing written, and skipped by the unchecked launcher. Skipped without a GPU (the
// refusals are in ../kv_write_test.cc, the emulated kernel in testing/cuda_emulation/kv_write_cases.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/kv_write.h"
#include "testing/step_reference.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

class WriteKvPagedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

// Host bytes (random: the cache's prior contents) and their copy on the GPU, viewed with `strides`.
struct Operand {
  std::vector<uint8_t> host;
  DeviceBuffer device;
  TensorView view;  // over host

  Operand(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, uint64_t seed, bool values) {
    int64_t extent = 1;
    for (size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * strides[d];
    host.resize(size_t(extent) * dtype_size(dtype) + 16);
    std::mt19937_64 rng(seed);
    for (auto& b : host) b = uint8_t(rng());
    view.data = host.data();
    view.dtype = dtype;
    view.ndim = int(shape.size());
    for (int d = 0; d < view.ndim; ++d) view.shape[d] = shape[size_t(d)], view.strides[d] = strides[size_t(d)];
    if (values) {  // N(0, 1.5) rows instead of raw bytes
      std::normal_distribution<float> dist(0.f, 1.5f);
      testing::for_each_offset(view, [&](int64_t o) { store_from_f32(view.data, dtype, o, dist(rng)); });
    }
    device = DeviceBuffer(Device::cuda(), host.size());
    device.upload(host.data(), host.size());
  }
  TensorView device_view() const {
    TensorView t = view;
    t.data = device.data();
    t.device = Device::cuda();
    return t;
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> b(host.size());
    device.download(b.data(), b.size());
    synchronize(current_stream());
    return b;
  }
};

std::vector<int64_t> contiguous_plus(const std::vector<int64_t>& shape, int64_t pad) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) s[size_t(d)] = stride, stride = stride * shape[size_t(d)] + pad;
  return s;
}

void check_write(DType rows_dtype, DType cache_dtype, bool heads, int64_t T, int64_t H, int64_t D, int64_t blocks,
                 int64_t bs, int64_t pad) {
  SCOPED_TRACE(std::string(dtype_name(rows_dtype)) + " -> " + dtype_name(cache_dtype) + (heads ? "" : " latent") +
               " D " + std::to_string(D));
  const bool quantized = cache_dtype == DType::i8 || cache_dtype == DType::f8_e4m3;
  const std::vector<int64_t> rs = heads ? std::vector<int64_t>{T, H, D} : std::vector<int64_t>{T, D};
  const std::vector<int64_t> cs = heads ? std::vector<int64_t>{blocks, bs, H, D} : std::vector<int64_t>{blocks, bs, D};
  const std::vector<int64_t> ss(cs.begin(), cs.end() - 1);
  Operand rows(rows_dtype, rs, contiguous_plus(rs, pad), 1, true), cache(cache_dtype, cs, contiguous_plus(cs, pad), 2, false);
  Operand scale(DType::f32, quantized ? ss : std::vector<int64_t>{1}, contiguous_plus(quantized ? ss : std::vector<int64_t>{1}, 1), 3, false);
  std::vector<int64_t> slots(static_cast<size_t>(blocks * bs));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(4));
  slots.resize(size_t(T));
  for (int64_t t = 2; t < T; t += 5) slots[size_t(t)] = -1;
  DeviceBuffer slot_mapping(Device::cuda(), slots.size() * sizeof(int64_t));
  slot_mapping.upload(slots.data(), slots.size() * sizeof(int64_t));
  const auto* dslots = static_cast<const int64_t*>(slot_mapping.data());

  write_paged_rows(rows.device_view(), dslots, cache.device_view(), "rows", "cache",
                   quantized ? scale.device_view() : TensorView{}, "scale");
  write_paged_rows(rows.view, slots.data(), cache.view, "rows", "cache", quantized ? scale.view : TensorView{}, "scale");
  const std::vector<uint8_t> got = cache.download();
  for (size_t b = 0; b < got.size(); ++b) ASSERT_EQ(int(got[b]), int(cache.host[b])) << "cache byte " << b;
  if (quantized) {
    const std::vector<uint8_t> got_scale = scale.download();
    for (size_t b = 0; b < got_scale.size(); ++b) ASSERT_EQ(int(got_scale[b]), int(scale.host[b])) << "scale byte " << b;
  }
}

TEST_F(WriteKvPagedGpu, MatchesTheCpuBitForBit) {
  for (DType cache : {DType::f32, DType::bf16, DType::f16, DType::i8, DType::f8_e4m3})
    for (DType rows : {DType::f32, DType::bf16, DType::f16}) {
      check_write(rows, cache, true, 300, 8, 128, 40, 16, 0);  // Llama-8B's shape, a prefill chunk
      check_write(rows, cache, true, 33, 3, 65, 9, 5, 3);      // odd sizes, padded strides
      check_write(rows, cache, false, 17, 1, 576, 6, 4, 1);    // MLA latent rows
    }
}

TEST_F(WriteKvPagedGpu, BadSlotIsRefusedOrSkipped) {
  Operand k(DType::bf16, {4, 2, 64}, contiguous_plus({4, 2, 64}, 0), 1, true);
  Operand v(DType::bf16, {4, 2, 64}, contiguous_plus({4, 2, 64}, 0), 2, true);
  Operand kc(DType::bf16, {2, 4, 2, 64}, contiguous_plus({2, 4, 2, 64}, 0), 3, false);
  Operand vc(DType::bf16, {2, 4, 2, 64}, contiguous_plus({2, 4, 2, 64}, 0), 4, false);
  const int64_t slots[4] = {0, 3, 8, 1};  // 8 is past the 8 slots
  DeviceBuffer slot_mapping(Device::cuda(), sizeof slots);
  slot_mapping.upload(slots, sizeof slots);
  const auto* dslots = static_cast<const int64_t*>(slot_mapping.data());
  testing::expect_error<ArgumentError>(
      [&] { write_kv_paged(k.device_view(), v.device_view(), dslots, kc.device_view(), vc.device_view()); },
      "slot_mapping: entry 2 = 8 is past the cache's 8 slots");
  EXPECT_EQ(kc.download(), kc.host) << "a refused write wrote k_cache";
  EXPECT_EQ(vc.download(), vc.host) << "a refused write wrote v_cache";

  // Unchecked, the bad token is skipped and the others land.
  const PagedRowsCuda w[2] = {{k.device_view(), kc.device_view(), {}, "k_new", "k_cache", "k_scale"},
                              {v.device_view(), vc.device_view(), {}, "v_new", "v_cache", "v_scale"}};
  write_paged_rows_cuda(w, dslots, /*check_slots=*/false, current_stream());
  const int64_t good[4] = {0, 3, -1, 1};
  write_kv_paged(k.view, v.view, good, kc.view, vc.view);
  EXPECT_EQ(kc.download(), kc.host);
  EXPECT_EQ(vc.download(), vc.host);
}

}  // namespace
}  // namespace attnzoo
