// Simple GLA: chunked and recurrent kernels against the double-precision recurrence on every target.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/linear/common/gla_test_util.h"
#include "kernels/linear/simple_gla/simple_gla.h"

namespace attnzoo {
namespace {
using testing::GlaCase;
using testing::GlaRunArgs;
using testing::HostTensor;

// Gate uniform in [g_min, g_max] per (token, value head).
void check(const GlaCase& c, float g_min, float g_max = 0.f, double tol = 1e-4) {
  HostTensor g = testing::uniform_tensor({c.B, c.T, c.HV}, 11, g_min, g_max);
  testing::expect_gla_paths_agree(c, [&](GlaPath path, const GlaRunArgs& a) {
    const TensorView none;
    if (path == GlaPath::reference) simple_gla_reference(a.q, a.k, a.v, g.view, none, a.o, a.opts);
    if (path == GlaPath::recurrent) recurrent_simple_gla(a.q, a.k, a.v, g.view, none, a.o, a.opts);
    if (path == GlaPath::chunk) chunk_simple_gla(a.q, a.k, a.v, g.view, none, a.o, a.opts);
  }, tol);
}

TEST(SimpleGla, RaggedLengths) {
  for (int64_t T : {1, 15, 63, 64, 65, 500, 1000}) check({.B = 1, .T = T, .H = 2, .HV = 2, .K = 32, .V = 32}, -0.5f);
}

TEST(SimpleGla, HeadDims) {
  for (int64_t D : {16, 60, 64, 100, 128})
    check({.B = 2, .T = 70, .H = 1, .HV = 1, .K = D, .V = D, .initial_state = true}, -0.3f);
  check({.B = 1, .T = 40, .H = 1, .HV = 1, .K = 60, .V = 100}, -0.3f);
}

TEST(SimpleGla, DecayFromNoneToStrong) {
  for (float g_min : {0.f, -0.01f, -1.f, -8.f})
    check({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 32, .V = 48, .initial_state = true}, g_min, g_min == 0.f ? 0.f : g_min / 2);
}

TEST(SimpleGla, GroupedValueHeads) {
  check({.B = 2, .T = 90, .H = 2, .HV = 4, .K = 32, .V = 16, .initial_state = true}, -0.2f);
  check({.B = 1, .T = 33, .H = 1, .HV = 3, .K = 16, .V = 24}, -0.2f);
}

TEST(SimpleGla, VarlenWithInitialState) {
  check({.B = 1, .T = 300, .H = 2, .HV = 2, .K = 32, .V = 32, .cu_seqlens = {0, 1, 65, 65, 190, 300},
         .initial_state = true}, -0.4f);
}

TEST(SimpleGla, ChunkSizes) {
  for (int64_t C : {16, 32, 64, 128})
    check({.B = 1, .T = 150, .H = 1, .HV = 1, .K = 64, .V = 64, .initial_state = true, .chunk_size = C}, -0.5f);
}

TEST(SimpleGla, Bf16Inputs) {
  check({.B = 1, .T = 100, .H = 2, .HV = 2, .K = 64, .V = 64, .initial_state = true, .dtype = DType::bf16}, -0.3f);
}

TEST(SimpleGla, ConstantGammaEqualsGate) {
  // g_gamma alone must act exactly like a gate holding the same value at every token.
  const int64_t T = 130, H = 2, K = 32;
  HostTensor q(DType::f32, {1, T, H, K}, 1), k(DType::f32, {1, T, H, K}, 2), v(DType::f32, {1, T, H, K}, 3);
  HostTensor g(DType::f32, {1, T, H}, 0, 0.f), gamma(DType::f32, {H}, 0, 0.f);
  gamma.view.ptr<float>()[0] = -0.1f;
  gamma.view.ptr<float>()[1] = -0.9f;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) g.view.ptr<float>()[t * H + h] = gamma.view.ptr<float>()[h];
  HostTensor a(DType::f32, {1, T, H, K}, 0, 0.f), b(DType::f32, {1, T, H, K}, 0, 0.f);
  chunk_simple_gla(q.view, k.view, v.view, TensorView{}, gamma.view, a.view, {});
  simple_gla_reference(q.view, k.view, v.view, g.view, TensorView{}, b.view, {});
  EXPECT_LE(testing::relative_rms(a, b), 1e-5);
}

TEST(SimpleGla, LongSequenceStable) {
  // T = 65536, strong decay and no decay: chunk == recurrent and finite.
  const int64_t T = 65536, K = 16;
  HostTensor q(DType::f32, {1, T, 1, K}, 1), k(DType::f32, {1, T, 1, K}, 2), v(DType::f32, {1, T, 1, K}, 3);
  for (float gv : {-8.f, 0.f}) {
    HostTensor g = testing::uniform_tensor({1, T, 1}, 5, gv, gv);
    HostTensor a(DType::f32, {1, T, 1, K}, 0, 0.f), b(DType::f32, {1, T, 1, K}, 0, 0.f);
    chunk_simple_gla(q.view, k.view, v.view, g.view, TensorView{}, a.view, {});
    recurrent_simple_gla(q.view, k.view, v.view, g.view, TensorView{}, b.view, {});
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_TRUE(std::isfinite(a.at(i))) << i;
    EXPECT_LE(testing::relative_rms(a, b), 1e-4) << "g=" << gv;
  }
}

TEST(SimpleGla, BadArguments) {
  HostTensor q(DType::f32, {1, 8, 2, 16}, 1), v(DType::f32, {1, 8, 3, 16}, 2), o(DType::f32, {1, 8, 3, 16}, 0);
  HostTensor g(DType::f32, {1, 8, 3}, 3), gi(DType::i32, {1, 8, 3}, 0, 0.f);
  EXPECT_THROW(chunk_simple_gla(q.view, q.view, v.view, g.view, {}, o.view, {}), ArgumentError);  // 3 % 2
  HostTensor v2(DType::f32, {1, 8, 2, 16}, 2), o2(DType::f32, {1, 8, 2, 16}, 0), g2(DType::f32, {1, 8, 2}, 3);
  GlaOptions bad_chunk;
  bad_chunk.chunk_size = 48;
  EXPECT_THROW(chunk_simple_gla(q.view, q.view, v2.view, g2.view, {}, o2.view, bad_chunk), ArgumentError);
  EXPECT_THROW(chunk_simple_gla(q.view, q.view, v2.view, g.view, {}, o2.view, {}), ArgumentError);  // g heads
  HostTensor gi2(DType::i32, {1, 8, 2}, 0, 0.f);
  EXPECT_THROW(chunk_simple_gla(q.view, q.view, v2.view, gi2.view, {}, o2.view, {}), DTypeError);
  HostTensor s_bad(DType::f32, {2, 2, 16, 16}, 0);
  GlaOptions bad_state;
  bad_state.initial_state = s_bad.view;
  EXPECT_THROW(recurrent_simple_gla(q.view, q.view, v2.view, g2.view, {}, o2.view, bad_state), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
