// The CUDA gated activation against activation_reference for every Activation, and the residual add (exact: one
// f32 add and one rounding on both sides). Layouts: separate gate / up rows (GatedMlp) and the two halves of one
// [T, 2I] row (silu_and_mul); odd widths take the scalar path. Refusals are host-only and run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/activations.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(GatedActivationCuda, RefusesNamingTheArgument) {
  const TensorView g = fake_cuda_view(DType::bf16, {4, 96});
  EXPECT_NO_THROW(check_gated_activation_cuda(g, g, g));
  TensorView host = g;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { gated_activation_cuda(Activation::silu, host, g, g); }, "gate: lives on cpu");
  expect_error<ArgumentError>([&] { check_gated_activation_cuda(g, fake_cuda_view(DType::bf16, {4, 95}), g); },
                              "up: shape [4, 95] differs from gate's [4, 96]");
  expect_error<DTypeError>([&] { check_gated_activation_cuda(g, g, fake_cuda_view(DType::f32, {4, 96})); },
                           "out: dtype float32 differs");
  expect_error<DTypeError>([&] { check_gated_activation_cuda(fake_cuda_view(DType::i8, {4, 96}), g, g); },
                           "gate: expected float32");
}

TEST(AddCuda, RefusesNamingTheArgument) {
  const TensorView a = fake_cuda_view(DType::f16, {7});
  EXPECT_NO_THROW(check_add_cuda(a, a, a));
  expect_error<ArgumentError>([&] { check_add_cuda(a, a, fake_cuda_view(DType::f16, {7}, Device::cuda(2))); },
                              "y: lives on cuda:2, the other operands on cuda:0");
  expect_error<ArgumentError>([&] { check_add_cuda(a, fake_cuda_view(DType::f16, {1, 7}), a); }, "b: shape");
  expect_error<DTypeError>([&] { check_add_cuda(a, fake_cuda_view(DType::bf16, {7}), a); }, "b: dtype bfloat16");
}

TEST(AddScaledCuda, RefusesNamingTheArgument) {
  const TensorView a = fake_cuda_view(DType::f32, {3, 8});
  EXPECT_NO_THROW(check_add_scaled_cuda(a, a, 0.5f, a));
  expect_error<ArgumentError>([&] { check_add_scaled_cuda(a, a, INFINITY, a); }, "alpha: must be finite");
  expect_error<ArgumentError>([&] { check_add_scaled_cuda(a, fake_cuda_view(DType::f32, {3, 9}), 1.f, a); },
                              "b: shape");
}

TEST(ScaleSoftcapCuda, RefusesNamingTheArgument) {
  const TensorView x = fake_cuda_view(DType::f32, {2, 50});
  EXPECT_NO_THROW(check_scale_softcap_cuda(x, x, 0.25f, 30.f));
  EXPECT_NO_THROW(check_scale_softcap_cuda(x, x, 1.f, 0.f));
  expect_error<ArgumentError>([&] { check_scale_softcap_cuda(x, x, NAN, 0.f); }, "scale: must be finite");
  expect_error<ArgumentError>([&] { check_scale_softcap_cuda(x, x, 1.f, -1.f); }, "cap: must be finite and >= 0");
  expect_error<ArgumentError>([&] { check_scale_softcap_cuda(x, fake_cuda_view(DType::f32, {2, 49}), 1.f, 0.f); },
                              "y: shape");
  // An f32 x rounded into a 16-bit y (the runner's un-normed block rows) is taken; the other way round is not.
  EXPECT_NO_THROW(check_scale_softcap_cuda(x, fake_cuda_view(DType::bf16, {2, 50}), 1.f, 0.f));
  expect_error<DTypeError>([&] { check_scale_softcap_cuda(fake_cuda_view(DType::bf16, {2, 50}), x, 1.f, 0.f); },
                           "y: dtype float32");
  expect_error<ArgumentError>([&] { check_scale_softcap_cuda(x, fake_cuda_view(DType::bf16, {2, 49}), 1.f, 0.f); },
                              "y: shape");
}

TEST(QueryTemperatureCuda, RefusesNamingTheArgument) {
  const TensorView q = fake_cuda_view(DType::bf16, {3, 256}), pos = fake_cuda_view(DType::i32, {3});
  EXPECT_NO_THROW(check_query_temperature_cuda(q, pos, 0.1f, 16));
  expect_error<ArgumentError>([&] { check_query_temperature_cuda(fake_cuda_view(DType::bf16, {3, 4, 64}), pos, 0.1f, 16); },
                              "q: expected [tokens, heads * head_dim]");
  expect_error<DTypeError>([&] { check_query_temperature_cuda(q, fake_cuda_view(DType::i64, {3}), 0.1f, 16); },
                           "positions: must be int32");
  expect_error<ArgumentError>([&] { check_query_temperature_cuda(q, fake_cuda_view(DType::i32, {4}), 0.1f, 16); },
                              "positions: expected a contiguous [3]");
  expect_error<ArgumentError>([&] { check_query_temperature_cuda(q, pos, NAN, 16); }, "beta: must be finite");
  expect_error<ArgumentError>([&] { check_query_temperature_cuda(q, pos, 0.1f, 0); }, "interval: must be positive");
}

#if ATTNZOO_WITH_CUDA

class ElementwiseCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

// gate and up as the halves of one [T, 2I] row (fused) or as two [T, I] tensors; out [T, I] contiguous.
void check_gated(Activation act, DType dtype, int64_t T, int64_t I, bool fused) {
  SCOPED_TRACE(std::string(activation_name(act)) + " " + dtype_name(dtype) + " T " + std::to_string(T) + " I " +
               std::to_string(I) + (fused ? " fused" : ""));
  DeviceOperand gate_up(dtype, {T, 2 * I}, 1, {}, 2.f), gate(dtype, {T, I}, 2, {}, 2.f), up(dtype, {T, I}, 3);
  DeviceOperand out(dtype, {T, I}, 0);
  TensorView g = gate.device_view(), u = up.device_view();
  if (fused) {
    g = gate_up.device_view();
    g.shape[1] = I;
    u = g;
    u.data = static_cast<char*>(g.data) + size_t(I) * dtype_size(dtype);
  }
  gated_activation_cuda(act, g, u, out.device_view());
  out.download();
  synchronize(current_stream());
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const float gv = fused ? gate_up.at(t * 2 * I + i) : gate.at(t * I + i);
      const float uv = fused ? gate_up.at(t * 2 * I + I + i) : up.at(t * I + i);
      const double want = double(activation_reference(act, gv)) * uv;
      // CUDA's expf / tanhf / erff are within 2 ulp, the libm ones within 1: a few f32 ulp apart, plus the absolute
      // error where 1 + tanh / 1 + erf cancel for negative inputs (2 ulp of 1, times |x| / 2 <= 4, times |up|).
      const double tol = testing::output_tolerance(dtype, want, 1e-6, 2e-6 * (1 + std::fabs(uv)));
      worst = std::max(worst, std::fabs(out.at(t * I + i) - want) / tol);
    }
  EXPECT_LE(worst, 1.0);
}

TEST_F(ElementwiseCudaGpu, GatedActivationMatchesReference) {
  for (Activation act : {Activation::silu, Activation::gelu_tanh, Activation::gelu, Activation::relu2})
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      check_gated(act, dt, 5, 256, false);  // vectors
      check_gated(act, dt, 3, 1001, true);  // odd halves: scalar
      check_gated(act, dt, 64, 96, true);   // fused halves, vectors (96 is whole vectors of every dtype)
    }
}

TEST_F(ElementwiseCudaGpu, AddIsExact) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {int64_t(8), int64_t(1), int64_t(4097), int64_t(1) << 16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      DeviceOperand a(dt, {3, n}, 1), b(dt, {3, n}, 2), y(dt, {3, n}, 0, {n + 5, 1});  // y with gaps: by rows
      add_cuda(a.device_view(), b.device_view(), y.device_view());
      add_cuda(a.device_view(), b.device_view(), a.device_view());  // in place, contiguous: one flat row
      y.download();
      std::vector<uint8_t> in_place = a.host;
      a.download();
      synchronize(current_stream());
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t i = 0; i < n; ++i) {
          uint8_t want[4];
          store_from_f32(want, dt, 0, load_as_f32(in_place.data(), dt, r * n + i) + b.at(r * n + i));
          ASSERT_EQ(y.at(r * (n + 5) + i), load_as_f32(want, dt, 0)) << r << ", " << i;
          ASSERT_EQ(a.at(r * n + i), load_as_f32(want, dt, 0)) << r << ", " << i;
        }
      EXPECT_TRUE(y.outside_untouched());
    }
}

TEST_F(ElementwiseCudaGpu, AddScaledMatchesTheCpuStep) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t n : {int64_t(1), int64_t(4097)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      DeviceOperand a(dt, {3, n}, 1), b(dt, {3, n}, 2), y(dt, {3, n}, 0);
      add_scaled_cuda(a.device_view(), b.device_view(), 0.22f, y.device_view());
      y.download();
      synchronize(current_stream());
      double worst = 0;
      for (int64_t i = 0; i < 3 * n; ++i) {
        const double want = double(float(a.at(i) + float(0.22f * b.at(i))));  // DecoderModel's x = x + rs * y
        worst = std::max(worst, std::fabs(y.at(i) - want) / testing::output_tolerance(dt, want, 1.2e-7, 1e-30));
      }
      EXPECT_LE(worst, 1.0);
    }
}

TEST_F(ElementwiseCudaGpu, ScaleSoftcapMatchesTheCpuStep) {
  for (auto [scale, cap] : {std::pair{1.f, 30.f}, {0.125f, 0.f}, {2.5f, 10.f}})
    for (int64_t n : {int64_t(256), int64_t(1001)}) {  // vectors; scalar
      SCOPED_TRACE("scale " + std::to_string(scale) + " cap " + std::to_string(cap) + " n " + std::to_string(n));
      DeviceOperand x(DType::f32, {4, n}, 1, {}, 40.f), y(DType::f32, {4, n}, 0);
      scale_softcap_cuda(x.device_view(), y.device_view(), scale, cap);
      y.download();
      synchronize(current_stream());
      double worst = 0;
      for (int64_t i = 0; i < 4 * n; ++i) {
        const float scaled = x.at(i) * scale;
        const double want = cap > 0.f ? double(cap) * std::tanh(double(scaled) / cap) : double(scaled);
        worst = std::max(worst, std::fabs(y.at(i) - want) / testing::output_tolerance(DType::f32, want, 1e-6, 1e-6));
      }
      EXPECT_LE(worst, 1.0);
    }
}

// The f32 residual stream rounded to the projections' bf16 / f16 rows (a block without a norm, OLMo 2).
TEST_F(ElementwiseCudaGpu, ScaleSoftcapRoundsF32RowsInto16Bit) {
  for (DType dt : {DType::bf16, DType::f16})
    for (int64_t n : {int64_t(256), int64_t(1001)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      DeviceOperand x(DType::f32, {4, n}, 1, {}, 40.f), y(dt, {4, n}, 0);
      scale_softcap_cuda(x.device_view(), y.device_view(), 1.f, 0.f);
      y.download();
      synchronize(current_stream());
      double worst = 0;
      for (int64_t i = 0; i < 4 * n; ++i)
        worst = std::max(worst, std::fabs(y.at(i) - double(x.at(i))) /
                                    testing::output_tolerance(dt, double(x.at(i)), 1e-6, 1e-6));
      EXPECT_LE(worst, 1.0);
    }
}

TEST_F(ElementwiseCudaGpu, QueryTemperatureMatchesTheCpuFormula) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t T = 7, W = 4 * 64;
    DeviceOperand q(dt, {T, W}, 1);
    std::vector<float> was(size_t(T * W));
    for (int64_t i = 0; i < T * W; ++i) was[size_t(i)] = q.at(i);
    const std::vector<int32_t> pos = {0, 15, 16, 40, 100, 1000, 5};
    DeviceBuffer positions(Device::cuda(), pos.size() * sizeof(int32_t));
    positions.upload(pos.data(), positions.bytes(), current_stream());
    TensorView pv = TensorView::contiguous(positions.data(), DType::i32, {T});
    pv.device = positions.device();
    query_temperature_cuda(q.device_view(), pv, 0.5f, 16);
    q.download();
    synchronize(current_stream());
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float s = 1.f + 0.5f * std::log(1.f + std::floor(float(pos[size_t(t)]) / 16.f));
      for (int64_t i = 0; i < W; ++i) {
        const double want = double(was[size_t(t * W + i)]) * s;
        worst = std::max(worst, std::fabs(q.at(t * W + i) - want) / testing::output_tolerance(dt, want, 4e-7, 1e-30));
      }
    }
    EXPECT_LE(worst, 1.0);
  }
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
