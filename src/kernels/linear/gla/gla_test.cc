// GLA (per-channel decay): chunked and recurrent kernels against the double-precision recurrence, every target.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/linear/common/gla_test_util.h"
#include "kernels/linear/gla/gla.h"

namespace attnzoo {
namespace {
using testing::GlaCase;
using testing::GlaRunArgs;
using testing::HostTensor;

void check(const GlaCase& c, float g_min, float g_max = 0.f, double tol = 1e-4) {
  HostTensor g = testing::uniform_tensor({c.B, c.T, c.HV, c.K}, 13, g_min, g_max);
  testing::expect_gla_paths_agree(c, [&](GlaPath path, const GlaRunArgs& a) {
    if (path == GlaPath::reference) gla_reference(a.q, a.k, a.v, g.view, a.o, a.opts);
    if (path == GlaPath::recurrent) recurrent_gla(a.q, a.k, a.v, g.view, a.o, a.opts);
    if (path == GlaPath::chunk) chunk_gla(a.q, a.k, a.v, g.view, a.o, a.opts);
  }, tol);
}

TEST(Gla, RaggedLengths) {
  for (int64_t T : {1, 15, 63, 64, 65, 500, 1000}) check({.B = 1, .T = T, .H = 2, .HV = 2, .K = 32, .V = 32}, -0.5f);
}

TEST(Gla, HeadDims) {
  for (int64_t D : {16, 60, 64, 100, 128})
    check({.B = 2, .T = 70, .H = 1, .HV = 1, .K = D, .V = D, .initial_state = true}, -0.3f);
  check({.B = 1, .T = 40, .H = 1, .HV = 1, .K = 100, .V = 60}, -0.3f);
}

TEST(Gla, DecayFromNoneToStrong) {
  for (float g_min : {0.f, -0.01f, -1.f, -8.f})
    check({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 32, .V = 48, .initial_state = true}, g_min);
  // Mixed: some channels barely decay while others decay at -8 per step.
  check({.B = 1, .T = 300, .H = 1, .HV = 1, .K = 64, .V = 32, .initial_state = true}, -8.f, 0.f);
}

TEST(Gla, GroupedValueHeads) {
  check({.B = 2, .T = 90, .H = 2, .HV = 4, .K = 32, .V = 16, .initial_state = true}, -0.2f);
}

TEST(Gla, VarlenWithInitialState) {
  check({.B = 1, .T = 300, .H = 2, .HV = 2, .K = 32, .V = 32, .cu_seqlens = {0, 1, 65, 65, 190, 300},
         .initial_state = true}, -0.4f);
}

TEST(Gla, ChunkSizes) {
  for (int64_t C : {16, 32, 64, 128})
    check({.B = 1, .T = 150, .H = 1, .HV = 1, .K = 64, .V = 64, .initial_state = true, .chunk_size = C}, -1.f);
}

TEST(Gla, Bf16Inputs) {
  check({.B = 1, .T = 100, .H = 2, .HV = 2, .K = 64, .V = 64, .initial_state = true, .dtype = DType::bf16}, -0.3f);
}

TEST(Gla, LongSequenceStable) {
  const int64_t T = 65536, K = 16;
  HostTensor q(DType::f32, {1, T, 1, K}, 1), k(DType::f32, {1, T, 1, K}, 2), v(DType::f32, {1, T, 1, K}, 3);
  for (float gv : {-8.f, 0.f}) {
    HostTensor g = testing::uniform_tensor({1, T, 1, K}, 5, gv, gv);
    HostTensor a(DType::f32, {1, T, 1, K}, 0, 0.f), b(DType::f32, {1, T, 1, K}, 0, 0.f);
    chunk_gla(q.view, k.view, v.view, g.view, a.view, {});
    recurrent_gla(q.view, k.view, v.view, g.view, b.view, {});
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_TRUE(std::isfinite(a.at(i))) << i;
    EXPECT_LE(testing::relative_rms(a, b), 1e-4) << "g=" << gv;
  }
}

TEST(Gla, BadArguments) {
  HostTensor q(DType::f32, {1, 8, 2, 16}, 1), v(DType::f32, {1, 8, 2, 16}, 2), o(DType::f32, {1, 8, 2, 16}, 0);
  HostTensor g_scalar(DType::f32, {1, 8, 2}, 3);
  EXPECT_THROW(chunk_gla(q.view, q.view, v.view, g_scalar.view, o.view, {}), ArgumentError);
  EXPECT_THROW(chunk_gla(q.view, q.view, v.view, TensorView{}, o.view, {}), ArgumentError);
  HostTensor k_short(DType::f32, {1, 8, 2, 8}, 1), g(DType::f32, {1, 8, 2, 16}, 3);
  EXPECT_THROW(chunk_gla(q.view, k_short.view, v.view, g.view, o.view, {}), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
