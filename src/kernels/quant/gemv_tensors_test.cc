// quant_gemv_tensors on the CPU: the same products as quant_gemv_f32, and the refusals that name the argument
// (the CUDA side's are in testing/cuda_emulation/quant_gemv_cases.cc and cuda/gemv_cuda_test.cc).
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/quant/gemv_tensors.h"
#include "kernels/quant/quant.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(QuantGemvTensors, OnTheCpuIsQuantGemvF32) {
  const int64_t N = 13, K = 256 * 3;
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_K, QuantType::BF16}) {
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 5);
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    for (int64_t M : {1, 3}) {
      testing::HostTensor x(DType::f32, {M, K}, 7);
      std::vector<float> want(size_t(M * N)), got(size_t(M * (N + 2)), -1.f);
      quant_gemv_f32(w, nullptr, x.view.ptr<float>(), M, want.data(), N);
      TensorView y = TensorView::contiguous(got.data(), DType::f32, {M, N});
      y.strides[0] = N + 2;  // padded rows: written where ldy says
      quant_gemv_tensors(w, Device::cpu(), x.view, y);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) EXPECT_EQ(got[size_t(m * (N + 2) + n)], want[size_t(m * N + n)]);
      EXPECT_EQ(got[size_t(N)], -1.f);
    }
  }
}

TEST(QuantGemvTensors, RefusesByName) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q8_0, 4, 64, 1);
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), QuantType::Q8_0, 4, 64, "w");
  std::vector<float> xs(64), ys(4);
  const TensorView x = TensorView::contiguous(xs.data(), DType::f32, {1, 64});
  const TensorView y = TensorView::contiguous(ys.data(), DType::f32, {1, 4});
  testing::expect_error<ArgumentError>([&] { quant_gemv_tensors(w, Device::cpu(), x, TensorView::contiguous(ys.data(), DType::f32, {1, 3})); },
                                       "y: must be [1, 4]");
  TensorView xg = x;
  xg.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { quant_gemv_tensors(w, Device::cpu(), xg, y); }, "x: lives on cuda:0");
  TensorView xb = x;
  xb.dtype = DType::bf16;
  testing::expect_error<DTypeError>([&] { quant_gemv_tensors(w, Device::cpu(), xb, y); }, "x: takes float32");
  if (!cuda_built()) {
    testing::expect_error<DeviceError>([&] { quant_gemv_tensors(w, Device::cuda(), x, y); }, "w:");
  }
}

}  // namespace
}  // namespace attnzoo
