// transpose_cuda: its refusals (host-only, run without a GPU), and on a GPU a column slice of wider token rows
// transposed into a padded channel-major block, exact. The kernel also runs under the emulator
// (testing/cuda_emulation/transpose_cases.cc).
#include "layers/cuda/transpose_cuda.h"

#include <gtest/gtest.h>

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

TEST(TransposeCuda, RefusesNamingTheArgument) {
  const TensorView a = fake_cuda_view(DType::f32, {4, 96}), at = fake_cuda_view(DType::f32, {96, 4});
  auto refuses = [](const Transpose& t) { return [t] { check_transpose_cuda(t); }; };
  EXPECT_NO_THROW(check_transpose_cuda({a, at}));
  TensorView host = a;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { transpose_cuda({host, at}); }, "src: lives on cpu");
  expect_error<DTypeError>(refuses({a, fake_cuda_view(DType::bf16, {96, 4})}), "dst: expected float32");
  expect_error<ArgumentError>(refuses({a, a}), "dst: expected [96, 4] (src [4, 96] transposed), got [4, 96]");
  TensorView overlapping = a;
  overlapping.strides[0] = 50;
  expect_error<ArgumentError>(refuses({overlapping, at}), "src: rows overlap");
  TensorView strided_cols = at;
  strided_cols.strides[1] = 2;
  expect_error<ArgumentError>(refuses({a, strided_cols}), "dst: last dimension must be contiguous");
  expect_error<ArgumentError>(refuses({fake_cuda_view(DType::f32, {96}), at}), "src: expected 2 dims");
}

#if ATTNZOO_WITH_CUDA

TEST(TransposeCuda, ASliceOfTokenRowsBecomesChannelRowsExactly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  // 37 tokens of [dt | B | C] rows (8 + 16 + 16 floats); B's 16 columns into [16, 37] rows at a stride of 40.
  const int64_t T = 37, cols = 40, from = 8, N = 16, stride = 40;
  DeviceOperand rows(DType::f32, {T, cols}, 1);
  DeviceOperand channels(DType::f32, {N, T}, 2, {stride, 1});
  TensorView slice = rows.device_view();
  slice.data = static_cast<float*>(slice.data) + from;
  slice.shape[1] = N;
  transpose_cuda({slice, channels.device_view()});
  channels.download();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t)
      ASSERT_EQ(channels.at(n * stride + t), rows.at(t * cols + from + n)) << "channel " << n << " token " << t;
  EXPECT_TRUE(channels.outside_untouched());
}

#endif

}  // namespace
}  // namespace attnzoo
