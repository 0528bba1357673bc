// S4D / DSS: the convolution form (direct and FFT) and the recurrent form == the double reference, on every SIMD
// target; the step == the scan; the kernel == its definition.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/linear/s4/s4.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t B = 2, T = 100, H = 5, N = 8;
  S4Discretization disc = S4Discretization::zoh;
  double dt_min = 0.001, dt_max = 0.1;
  bool with_D = true, with_h0 = true;
  std::vector<int32_t> cu;
  DType dtype = DType::f32;
};

// S4D-Lin's initialization (state-spaces): A = -1/2 + i pi n, dt log-uniform in [dt_min, dt_max], B = 1, C ~ N(0, 1)
// complex; the real parts of A jittered so channels differ.
struct Params {
  HostTensor dt, A, B, C, D;
  Params(const Case& c)
      : dt(DType::f32, {c.H}, 11, 0), A(DType::f32, {c.H, c.N, 2}, 12, 0.2f), B(DType::f32, {c.H, c.N, 2}, 13, 0),
        C(DType::f32, {c.H, c.N, 2}, 14, 0.7f), D(DType::f32, {c.H}, 15) {
    for (int64_t h = 0; h < c.H; ++h) {
      const double f = c.H == 1 ? 0.0 : double(h) / double(c.H - 1);
      dt.view.ptr<float>()[h] = float(std::exp(std::log(c.dt_min) + f * (std::log(c.dt_max) - std::log(c.dt_min))));
      for (int64_t n = 0; n < c.N; ++n) {
        float* a = A.view.ptr<float>() + 2 * (h * c.N + n);
        a[0] = -0.5f * std::exp(a[0]);
        a[1] = float(M_PI * double(n));
        B.view.ptr<float>()[2 * (h * c.N + n)] = 1.f;
      }
    }
  }
  S4Params params(const Case& c) const {
    return {.dt = dt.view, .A = A.view, .B = B.view, .C = C.view, .D = c.with_D ? D.view : TensorView{},
            .discretization = c.disc, .dss_length = c.T};
  }
};

void check(const Case& c) {
  const int64_t nseq = c.cu.empty() ? c.B : int64_t(c.cu.size()) - 1;
  Params prm(c);
  HostTensor u(c.dtype, {c.B, c.T, c.H}, 1), h0(DType::f32, {nseq, c.H, c.N, 2}, 2, 0.5f);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.H}, 0, 0), s_ref(DType::f32, {nseq, c.H, c.N, 2}, 0, 0);
  HostTensor o(DType::f32, {c.B, c.T, c.H}, 0, 0), s(DType::f32, {nseq, c.H, c.N, 2}, 0, 0);
  S4Args a{.params = prm.params(c), .u = u.view};
  if (!c.cu.empty()) a.cu_seqlens = c.cu.data(), a.cu_seqlens_len = int64_t(c.cu.size());
  if (c.with_h0) a.initial_state = h0.view;
  a.out = o_ref.view, a.final_state = s_ref.view;
  s4_reference(a);
  a.final_state = s.view;
  const double tol = c.dtype == DType::f32 ? 1e-5 : 1e-2;
  HostTensor o_conv(DType::f32, {c.B, c.T, c.H}, 0, 0);
  testing::for_each_target([&](Target) {
    a.out = o_conv.view;
    s4_conv(a);
    EXPECT_LE(testing::relative_rms(o_conv, o_ref), tol) << "conv T=" << c.T << " H=" << c.H << " N=" << c.N;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "conv state T=" << c.T;
    a.out = o.view;
    s4_recurrent(a);
    EXPECT_LE(testing::relative_rms(o, o_ref), tol) << "recurrent T=" << c.T << " H=" << c.H << " N=" << c.N;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "recurrent state T=" << c.T;
    EXPECT_LE(testing::relative_rms(o_conv, o), tol) << "conv vs recurrent T=" << c.T;
  });
}

TEST(S4, DiscretizationsAndLengths) {
  for (auto disc : {S4Discretization::zoh, S4Discretization::bilinear, S4Discretization::dss})
    for (int64_t T : {1, 37, 128, 129, 700}) check({.T = T, .disc = disc});
}

TEST(S4, ChannelsModesAndOptions) {
  for (int64_t H : {1, 16, 33}) check({.B = 1, .T = 300, .H = H, .N = 4});
  check({.T = 200, .N = 1, .with_D = false, .with_h0 = false});
  check({.T = 200, .N = 40, .dt_min = 0.05, .dt_max = 0.5});
}

TEST(S4, PackedSequencesMixDirectAndFft) {
  check({.B = 1, .T = 900, .H = 6, .cu = {0, 1, 130, 130, 200, 900}});
  check({.B = 1, .T = 50, .H = 3, .disc = S4Discretization::bilinear, .with_h0 = false, .cu = {0, 50}});
}

TEST(S4, Bf16Inputs) { check({.T = 300, .H = 9, .dtype = DType::bf16}); }

// The length: one channel pair, the slowest default decay (dt = 0.001 remembers ~2000 steps).
TEST(S4, LongSequence16k) { check({.B = 1, .T = 16384, .H = 2, .N = 16, .dt_max = 0.001}); }

TEST(S4, KernelMatchesDefinition) {
  for (auto disc : {S4Discretization::zoh, S4Discretization::bilinear, S4Discretization::dss}) {
    Case c{.T = 5000, .H = 7, .N = 12, .disc = disc};
    Params prm(c);
    HostTensor K(DType::f32, {c.H, c.T}, 0, 0), K_ref(DType::f32, {c.H, c.T}, 0, 0);
    s4_kernel_reference(prm.params(c), K_ref.view);
    testing::for_each_target([&](Target) {
      s4_kernel(prm.params(c), K.view);
      EXPECT_LE(testing::relative_rms(K, K_ref), 1e-6);
    });
  }
}

TEST(S4, StepsContinueTheScan) {
  Case c{.B = 3, .T = 20, .H = 11, .N = 6, .disc = S4Discretization::bilinear};
  Params prm(c);
  HostTensor u(DType::f32, {c.B, c.T, c.H}, 1), o(DType::f32, {c.B, c.T, c.H}, 0, 0),
      s(DType::f32, {c.B, c.H, c.N, 2}, 0, 0);
  S4Args a{.params = prm.params(c), .u = u.view, .final_state = s.view, .out = o.view};
  s4_reference(a);
  testing::for_each_target([&](Target) {
    HostTensor state(DType::f32, {c.B, c.H, c.N, 2}, 0, 0), ut(DType::f32, {c.B, c.H}, 0, 0),
        y(DType::f32, {c.B, c.H}, 0, 0);
    double err = 0, norm = 0;
    for (int64_t t = 0; t < c.T; ++t) {
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t h = 0; h < c.H; ++h) ut.view.ptr<float>()[b * c.H + h] = u.at((b * c.T + t) * c.H + h);
      s4_step({.params = prm.params(c), .state = state.view, .u = ut.view, .y = y.view});
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t h = 0; h < c.H; ++h) {
          const double want = o.at((b * c.T + t) * c.H + h);
          err += std::pow(y.at(b * c.H + h) - want, 2), norm += want * want;
        }
    }
    EXPECT_LE(std::sqrt(err / norm), 1e-5);
    EXPECT_LE(testing::relative_rms(state, s), 1e-5);
  });
}

TEST(S4, RejectsBadArguments) {
  Case c{.B = 1, .T = 10, .H = 3, .N = 4};
  Params prm(c);
  HostTensor u(DType::f32, {1, 10, 3}, 1), o(DType::f32, {1, 10, 3}, 0, 0);
  S4Args a{.params = prm.params(c), .u = u.view, .out = o.view};
  prm.A.view.ptr<float>()[2] = 0.1f;  // Re(A[0, 1]) > 0
  EXPECT_THROW(s4_conv(a), ArgumentError);
  prm.A.view.ptr<float>()[2] = -0.1f;
  prm.dt.view.ptr<float>()[1] = 0.f;
  EXPECT_THROW(s4_recurrent(a), ArgumentError);
  prm.dt.view.ptr<float>()[1] = 0.01f;
  a.params.discretization = S4Discretization::dss, a.params.dss_length = 0;
  EXPECT_THROW(s4_conv(a), ArgumentError);
  a.params = prm.params(c);
  HostTensor bad_u(DType::f32, {1, 10, 4}, 1);
  a.u = bad_u.view;
  EXPECT_THROW(s4_conv(a), ArgumentError);
  EXPECT_THROW(s4_discretization("euler"), ArgumentError);
  s4_conv({.params = prm.params(c), .u = u.view, .out = o.view});  // and the valid call runs
}

}  // namespace
}  // namespace attnzoo
