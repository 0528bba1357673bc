// RWKV-4 WKV: the vectorized recurrence == double reference, on every SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/linear/rwkv4/rwkv4.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t B = 1, T = 64, C = 32;
  float k_scale = 1.f;
  float w_value = NAN;  // NaN: random w; else every w equal (log of the per-step decay rate)
  bool with_h0 = true;
  std::vector<int32_t> cu;
  DType dtype = DType::f32;
};

void check(const Case& c) {
  const int64_t nseq = c.cu.empty() ? c.B : int64_t(c.cu.size()) - 1;
  HostTensor w(DType::f32, {c.C}, 1), u(DType::f32, {c.C}, 2), k(c.dtype, {c.B, c.T, c.C}, 3, c.k_scale),
      v(c.dtype, {c.B, c.T, c.C}, 4);
  if (!std::isnan(c.w_value))
    for (int64_t i = 0; i < c.C; ++i) w.view.ptr<float>()[i] = c.w_value;
  // A realistic initial state: run the reference over a short prefix.
  HostTensor h0(DType::f32, {nseq, 3, c.C}, 0, 0);
  {
    HostTensor kp(DType::f32, {nseq, 5, c.C}, 5), vp(DType::f32, {nseq, 5, c.C}, 6), op(DType::f32, {nseq, 5, c.C}, 0, 0);
    rwkv4_reference({.w = w.view, .u = u.view, .k = kp.view, .v = vp.view, .final_state = h0.view, .out = op.view});
  }
  HostTensor o_ref(DType::f32, {c.B, c.T, c.C}, 0, 0), s_ref(DType::f32, {nseq, 3, c.C}, 0, 0);
  HostTensor o(DType::f32, {c.B, c.T, c.C}, 0, 0), s(DType::f32, {nseq, 3, c.C}, 0, 0);
  Rwkv4Args a{.w = w.view, .u = u.view, .k = k.view, .v = v.view};
  if (c.with_h0) a.initial_state = h0.view;
  if (!c.cu.empty()) a.cu_seqlens = c.cu.data(), a.cu_seqlens_len = int64_t(c.cu.size());
  a.out = o_ref.view, a.final_state = s_ref.view;
  rwkv4_reference(a);
  a.out = o.view, a.final_state = s.view;
  const double tol = c.dtype == DType::f32 ? 1e-4 : 1e-2;
  testing::for_each_target([&](Target) {
    recurrent_rwkv4(a);
    EXPECT_LE(testing::relative_rms(o, o_ref), tol) << "T=" << c.T << " C=" << c.C;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "state T=" << c.T << " C=" << c.C;
  });
}

TEST(Rwkv4, RaggedLengthsAndChannels) {
  for (int64_t T : {1, 15, 63, 64, 65, 500}) check({.T = T});
  for (int64_t C : {1, 16, 60, 100, 130}) check({.B = 2, .T = 40, .C = C});
}

TEST(Rwkv4, PackedSequencesAndNoState) {
  check({.T = 300, .C = 48, .cu = {0, 1, 64, 65, 300}});
  check({.T = 70, .C = 48, .with_h0 = false, .cu = {0, 0, 70}});
  check({.B = 3, .T = 50, .with_h0 = false});
}

TEST(Rwkv4, DecayRangeAndLargeKeys) {
  check({.T = 200, .w_value = -8.f});              // almost no decay (w' = -3e-4)
  check({.T = 200, .w_value = 2.f});               // strong decay (w' = -7.4)
  check({.T = 200, .k_scale = 30.f});              // exponents far beyond f32 range without the running max
}

TEST(Rwkv4, Bf16Inputs) { check({.B = 2, .T = 100, .C = 64, .dtype = DType::bf16}); }

TEST(Rwkv4, LongSequenceStaysFinite) {
  for (float w : {-8.f, 2.f}) {
    const int64_t T = 65536, C = 16;
    HostTensor wt(DType::f32, {C}, 1), u(DType::f32, {C}, 2), k(DType::f32, {1, T, C}, 3, 5.f), v(DType::f32, {1, T, C}, 4);
    for (int64_t i = 0; i < C; ++i) wt.view.ptr<float>()[i] = w;
    HostTensor o(DType::f32, {1, T, C}, 0, 0), o_ref(DType::f32, {1, T, C}, 0, 0);
    recurrent_rwkv4({.w = wt.view, .u = u.view, .k = k.view, .v = v.view, .out = o.view});
    rwkv4_reference({.w = wt.view, .u = u.view, .k = k.view, .v = v.view, .out = o_ref.view});
    for (int64_t i = 0; i < o.numel(); ++i) ASSERT_TRUE(std::isfinite(o.at(i)));
    // With w' = -3e-4 each output averages ~3000 tokens; f32 running sums (as in every RWKV-4 kernel) drift
    // ~n * eps from the double reference over such a window, so this bound is looser than the others.
    EXPECT_LE(testing::relative_rms(o, o_ref), 2e-3);
  }
}

TEST(Rwkv4, RejectsBadArguments) {
  HostTensor w(DType::f32, {8}, 1), u(DType::f32, {7}, 2), k(DType::f32, {1, 4, 8}, 3), v(DType::f32, {1, 4, 8}, 4);
  HostTensor o(DType::f32, {1, 4, 8}, 0, 0), bad_state(DType::bf16, {1, 3, 8}, 0, 0);
  EXPECT_THROW(recurrent_rwkv4({.w = w.view, .u = u.view, .k = k.view, .v = v.view, .out = o.view}), ArgumentError);
  EXPECT_THROW(recurrent_rwkv4({.w = w.view, .u = w.view, .k = k.view, .v = v.view, .initial_state = bad_state.view,
                                .out = o.view}),
               DTypeError);
}

}  // namespace
}  // namespace attnzoo
