// Mamba selective scan: the vectorized scan == double reference, on every SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/linear/mamba/mamba.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t B = 1, D = 20, L = 64, N = 16, G = 0;  // G = 0: B, C are [B, N, L]; else [B, G, N, L]
  float A_scale = 1.f;                          // A = -A_scale * |N(0,1)|; 0 = no decay
  bool with_D = true, with_z = true, with_bias = true, softplus = true, with_h0 = true;
  std::vector<int32_t> cu;
  DType dtype = DType::f32;
};

struct Inputs {
  HostTensor u, delta, A, B, C, D, z, bias, h0;
  static std::vector<int64_t> bc_shape(const Case& c) {
    return c.G ? std::vector<int64_t>{c.B, c.G, c.N, c.L} : std::vector<int64_t>{c.B, c.N, c.L};
  }
  Inputs(const Case& c, int64_t nseq)
      : u(c.dtype, {c.B, c.D, c.L}, 1), delta(c.dtype, {c.B, c.D, c.L}, 2, 0.5f), A(DType::f32, {c.D, c.N}, 3),
        B(c.dtype, bc_shape(c), 4, 0.5f), C(c.dtype, bc_shape(c), 5, 0.5f), D(DType::f32, {c.D}, 6),
        z(c.dtype, {c.B, c.D, c.L}, 7), bias(DType::f32, {c.D}, 8, 0.3f), h0(DType::f32, {nseq, c.D, c.N}, 9) {
    for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -c.A_scale * std::fabs(A.at(i));
  }
  SelectiveScanArgs args(const Case& c) const {
    SelectiveScanArgs a;
    a.u = u.view, a.delta = delta.view, a.A = A.view, a.B = B.view, a.C = C.view;
    if (c.with_D) a.D = D.view;
    if (c.with_z) a.z = z.view;
    if (c.with_bias) a.delta_bias = bias.view;
    a.delta_softplus = c.softplus;
    if (c.with_h0) a.initial_state = h0.view;
    if (!c.cu.empty()) a.cu_seqlens = c.cu.data(), a.cu_seqlens_len = int64_t(c.cu.size());
    return a;
  }
};

void check(const Case& c) {
  const int64_t nseq = c.cu.empty() ? c.B : int64_t(c.cu.size()) - 1;
  Inputs in(c, nseq);
  HostTensor o_ref(DType::f32, {c.B, c.D, c.L}, 0, 0), s_ref(DType::f32, {nseq, c.D, c.N}, 0, 0);
  HostTensor o(DType::f32, {c.B, c.D, c.L}, 0, 0), s(DType::f32, {nseq, c.D, c.N}, 0, 0);
  SelectiveScanArgs a = in.args(c);
  a.out = o_ref.view, a.final_state = s_ref.view;
  selective_scan_reference(a);
  a.out = o.view, a.final_state = s.view;
  const double tol = c.dtype == DType::f32 ? 1e-4 : 1e-2;
  testing::for_each_target([&](Target) {
    selective_scan(a);
    EXPECT_LE(testing::relative_rms(o, o_ref), tol) << "L=" << c.L << " D=" << c.D << " N=" << c.N;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "state L=" << c.L << " D=" << c.D;
  });
}

TEST(SelectiveScan, RaggedLengths) {
  for (int64_t L : {1, 15, 63, 64, 65, 500}) check({.L = L});
}

TEST(SelectiveScan, ChannelsAndStateSizes) {
  for (int64_t D : {1, 16, 33, 100}) check({.D = D, .L = 70});
  for (int64_t N : {1, 4, 16, 60}) check({.D = 24, .L = 70, .N = N});
}

TEST(SelectiveScan, GroupsAndBatches) {
  check({.B = 2, .D = 48, .L = 90, .N = 8, .G = 3});  // 16 channels per group
  check({.B = 3, .D = 20, .L = 40, .N = 8, .G = 2});  // 10 channels per group: partial blocks
  check({.B = 2, .D = 20, .L = 40, .N = 8, .G = 1});
}

TEST(SelectiveScan, PackedSequences) {
  check({.B = 1, .D = 20, .L = 400, .N = 8, .cu = {0, 1, 64, 65, 130, 400}});
  check({.B = 1, .D = 20, .L = 70, .N = 8, .with_h0 = false, .cu = {0, 0, 70}});
}

TEST(SelectiveScan, DecayRangeAndOptions) {
  check({.L = 200, .A_scale = 0.f});   // no decay
  check({.L = 200, .A_scale = 16.f});  // strong decay
  check({.L = 100, .with_D = false, .with_z = false, .with_bias = false, .softplus = false, .with_h0 = false});
}

TEST(SelectiveScan, Bf16Inputs) { check({.B = 2, .D = 24, .L = 100, .N = 16, .G = 2, .dtype = DType::bf16}); }

TEST(SelectiveScan, LongSequenceStaysFinite) {
  Case c{.D = 16, .L = 65536, .N = 4, .A_scale = 8.f, .with_z = false};
  Inputs in(c, 1);
  HostTensor o(DType::f32, {1, 16, c.L}, 0, 0), o_ref(DType::f32, {1, 16, c.L}, 0, 0);
  SelectiveScanArgs a = in.args(c);
  a.out = o.view;
  selective_scan(a);
  a.out = o_ref.view;
  selective_scan_reference(a);
  for (int64_t i = 0; i < o.numel(); ++i) ASSERT_TRUE(std::isfinite(o.at(i)));
  EXPECT_LE(testing::relative_rms(o, o_ref), 1e-4);
}

TEST(SelectiveScan, StateUpdateMatchesReference) {
  const int64_t Bn = 3, D = 40, N = 12, G = 2;
  HostTensor x(DType::f32, {Bn, D}, 1), dt(DType::f32, {Bn, D}, 2), A(DType::f32, {D, N}, 3), B(DType::f32, {Bn, G, N}, 4),
      C(DType::f32, {Bn, G, N}, 5), Dv(DType::f32, {D}, 6), z(DType::f32, {Bn, D}, 7), bias(DType::f32, {D}, 8);
  HostTensor state0(DType::f32, {Bn, D, N}, 9);
  for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -std::fabs(A.at(i));
  testing::for_each_target([&](Target) {
    HostTensor s_ref(DType::f32, {Bn, D, N}, 9), s(DType::f32, {Bn, D, N}, 9);
    HostTensor y_ref(DType::f32, {Bn, D}, 0, 0), y(DType::f32, {Bn, D}, 0, 0);
    SelectiveStateUpdateArgs a{.state = s_ref.view, .x = x.view, .dt = dt.view, .A = A.view, .B = B.view,
                               .C = C.view, .D = Dv.view, .z = z.view, .dt_bias = bias.view, .dt_softplus = true,
                               .y = y_ref.view};
    selective_state_update_reference(a);
    a.state = s.view, a.y = y.view;
    selective_state_update(a);
    EXPECT_LE(testing::relative_rms(y, y_ref), 1e-5);
    EXPECT_LE(testing::relative_rms(s, s_ref), 1e-5);
    EXPECT_GT(testing::relative_rms(s, state0), 1e-3);
  });
}

TEST(SelectiveScan, RejectsBadArguments) {
  Case c{.D = 20, .L = 10, .G = 3};
  Inputs in(c, 1);
  HostTensor o(DType::f32, {1, 20, 10}, 0, 0);
  SelectiveScanArgs a = in.args(c);
  a.out = o.view;
  EXPECT_THROW(selective_scan(a), ArgumentError);  // 3 groups do not divide 20 channels
  Case ok{.D = 20, .L = 10};
  Inputs in2(ok, 1);
  a = in2.args(ok);
  a.out = o.view;
  HostTensor bad_delta(DType::f32, {1, 20, 9}, 1);
  a.delta = bad_delta.view;
  EXPECT_THROW(selective_scan(a), ArgumentError);
  a = in2.args(ok);
  a.out = o.view;
  HostTensor int_u(DType::i32, {1, 20, 10}, 0, 0);
  a.u = int_u.view;
  EXPECT_THROW(selective_scan(a), DTypeError);
}

}  // namespace
}  // namespace attnzoo
