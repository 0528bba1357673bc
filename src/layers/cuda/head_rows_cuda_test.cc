// copy_head_rows_cuda: its refusals (host-only, run without a GPU), and on a GPU the k_pe broadcast with zero
// padding and a padding gather of rows, bit for bit against the host twin (layers/head_rows.h). Every case of
// MLA's expanded prefill also runs under the emulator (testing/cuda_emulation/head_rows_cases.cc).
#include "layers/cuda/head_rows_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/step_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(HeadRowsCuda, RefusesNamingTheArgument) {
  const TensorView src = fake_cuda_view(DType::bf16, {4, 3, 40}), dst = fake_cuda_view(DType::bf16, {4, 3, 64});
  auto refuses = [](const HeadRowCopy& c) { return [c] { check_head_rows_cuda(c); }; };
  EXPECT_NO_THROW(check_head_rows_cuda({src, dst, nullptr, nullptr, 4}));
  EXPECT_NO_THROW(check_head_rows_cuda({fake_cuda_view(DType::bf16, {4, 1, 40}), dst, nullptr, nullptr, 4}));
  TensorView host = src;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { copy_head_rows_cuda({host, dst, nullptr, nullptr, 4}); }, "src: lives on cpu");
  expect_error<DTypeError>(refuses({fake_cuda_view(DType::f32, {4, 3, 40}), dst, nullptr, nullptr, 4}),
                           "src: takes bfloat16 or float16");
  expect_error<DTypeError>(refuses({src, fake_cuda_view(DType::f16, {4, 3, 64}), nullptr, nullptr, 4}),
                           "dst: is float16, src bfloat16");
  expect_error<ArgumentError>(refuses({src, fake_cuda_view(DType::bf16, {4, 2, 64}), nullptr, nullptr, 4}),
                              "src: has 3 heads, dst 2");
  expect_error<ArgumentError>(refuses({src, fake_cuda_view(DType::bf16, {4, 3, 32}), nullptr, nullptr, 4}),
                              "dst: is 32 wide, narrower than src's 40");
  expect_error<ArgumentError>(refuses({src, dst, nullptr, nullptr, 5}), "src: has 4 rows, 5 copied");
  expect_error<ArgumentError>(refuses({fake_cuda_view(DType::bf16, {4, 120}), dst, nullptr, nullptr, 4}),
                              "src: must be [rows, heads, cols]");
}

#if ATTNZOO_WITH_CUDA

TEST(HeadRowsCuda, BroadcastsPadsAndGathersLikeItsTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  // k_pe: [7, 1, 16] at column 64 of 80-wide latent rows, broadcast to 4 heads from column 32 of 64, zeros after.
  DeviceOperand latent(DType::bf16, {7, 1, 80}, 1);
  DeviceOperand k(DType::bf16, {7, 4, 64}, 2);
  auto cols = [](TensorView t, int64_t col, int64_t n) {
    t.data = static_cast<uint8_t*>(t.data) + size_t(col) * 2;
    t.shape[2] = n;
    return t;
  };
  std::vector<uint8_t> twin = k.host;
  TensorView twin_k = k.view;
  twin_k.data = twin.data();
  copy_head_rows_cuda({cols(latent.device_view(), 64, 16), cols(k.device_view(), 32, 32), nullptr, nullptr, 7});
  copy_head_rows({cols(latent.view, 64, 16), cols(twin_k, 32, 32), nullptr, nullptr, 7});
  k.download();
  EXPECT_EQ(0, std::memcmp(k.host.data(), twin.data(), twin.size()));

  // Rows {5, 0, 3} of [6, 2, 48] gathered into [3, 2, 64], zero-padded.
  DeviceOperand q(DType::f16, {6, 2, 48}, 3);
  DeviceOperand qp(DType::f16, {3, 2, 64}, 4);
  const std::vector<int32_t> rows = {5, 0, 3};
  DeviceBuffer index(Device::cuda(), rows.size() * sizeof(int32_t));
  index.upload(rows.data(), index.bytes());
  std::vector<uint8_t> twin_q = qp.host;
  TensorView twin_qp = qp.view;
  twin_qp.data = twin_q.data();
  copy_head_rows_cuda({q.device_view(), qp.device_view(), index.as<int32_t>(), nullptr, 3});
  copy_head_rows({q.view, twin_qp, rows.data(), nullptr, 3});
  qp.download();
  EXPECT_EQ(0, std::memcmp(qp.host.data(), twin_q.data(), twin_q.size()));
}

#endif

}  // namespace
}  // namespace attnzoo
