// The Kimi Delta Attention mixer on a tiny random layer built from in-memory weights: the conv tail and the
// recurrent state carry across prefill pieces and decode steps exactly, a batch of two sequences equals the
// sequences run alone, and bad weights are refused by name.
#include "layers/kda_mixer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

struct KdaFixture {
  KdaConfig c{.hidden = 24, .num_heads = 2, .head_dim = 16, .conv_kernel = 4};
  int64_t D = c.qkv_dim(), K = c.head_dim;
  HostTensor q{DType::f32, {D, c.hidden}, 1, 0.2f}, k{DType::f32, {D, c.hidden}, 2, 0.2f},
      v{DType::f32, {D, c.hidden}, 3, 0.2f};
  HostTensor q_conv{DType::bf16, {D, 1, c.conv_kernel}, 4, 0.5f}, k_conv{DType::f32, {D, c.conv_kernel}, 5, 0.5f},
      v_conv{DType::f32, {D, 1, c.conv_kernel}, 6, 0.5f};
  HostTensor f_a{DType::f32, {K, c.hidden}, 7, 0.2f}, f_b{DType::f32, {D, K}, 8, 0.2f};
  HostTensor A_log{DType::f32, {1, 1, c.num_heads, 1}, 9, 0.5f}, dt_bias{DType::f32, {D}, 10, 0.5f};
  HostTensor b{DType::f32, {c.num_heads, c.hidden}, 11, 0.3f};
  HostTensor g_a{DType::f32, {K, c.hidden}, 12, 0.2f}, g_b{DType::f32, {D, K}, 13, 0.2f};
  HostTensor norm{DType::f32, {K}, 14, 0.3f}, o{DType::f32, {c.hidden, D}, 15, 0.2f};

  KdaWeights weights() const {
    KdaWeights w;
    w.q_proj = Linear::from_weights(q.view, {}, "q_proj");
    w.k_proj = Linear::from_weights(k.view, {}, "k_proj");
    w.v_proj = Linear::from_weights(v.view, {}, "v_proj");
    w.q_conv = q_conv.view;
    w.k_conv = k_conv.view;
    w.v_conv = v_conv.view;
    w.f_a_proj = Linear::from_weights(f_a.view, {}, "f_a_proj");
    w.f_b_proj = Linear::from_weights(f_b.view, {}, "f_b_proj");
    w.A_log = A_log.view;
    w.dt_bias = dt_bias.view;
    w.b_proj = Linear::from_weights(b.view, {}, "b_proj");
    w.g_a_proj = Linear::from_weights(g_a.view, {}, "g_a_proj");
    w.g_b_proj = Linear::from_weights(g_b.view, {}, "g_b_proj");
    w.o_norm_weight = norm.view;
    w.o_proj = Linear::from_weights(o.view, {}, "o_proj");
    return w;
  }
  KdaMixer build() const { return KdaMixer(c, weights(), "mixer"); }
};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

TEST(KdaMixer, PrefillPiecesAndDecodeStepsMatchOnePrefill) {
  KdaFixture f;
  const KdaMixer m = f.build();
  const int64_t T = 140;
  HostTensor x(DType::f32, {T, f.c.hidden}, 21);
  const auto whole = testing::run_mixer_pieces(m, x.view.ptr<float>(), f.c.hidden, {T});
  const double scale = max_abs(whole);
  ASSERT_GT(scale, 1e-3);
  for (float y : whole) ASSERT_TRUE(std::isfinite(y));
  // Pieces shorter than the conv tail, around chunk boundaries, and pure token-by-token decode.
  for (const auto& pieces : std::vector<std::vector<int64_t>>{{1, 2, 1, 17, 64, 55}, {100, 40},
                                                               std::vector<int64_t>(size_t(T), 1)}) {
    const auto got = testing::run_mixer_pieces(m, x.view.ptr<float>(), f.c.hidden, pieces);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], whole[i], 2e-5 * (1 + scale)) << i;
  }
  EXPECT_EQ(m.cache_spec().fixed_bytes(),
            4 * ((f.c.conv_dim() * f.c.conv_state_len() + 15) / 16 * 16 + f.c.num_heads * f.c.head_dim * f.c.head_dim));
  EXPECT_EQ(m.cache_spec().bytes_per_token(), 0);
}

TEST(KdaMixer, RaggedTwoSequenceBatchMatchesSeparateRuns) {
  KdaFixture f;
  const KdaMixer m = f.build();
  const int64_t H = f.c.hidden, Ta = 37, Tb = 5;
  HostTensor x(DType::f32, {Ta + Tb + 2, H}, 31);
  const float* xa = x.view.ptr<float>();
  const float* xb = xa + Ta * H;
  const float* xnext = xb + Tb * H;  // one decode token for each afterwards
  std::vector<float> a_in(xa, xa + Ta * H), b_in(xb, xb + Tb * H);
  a_in.insert(a_in.end(), xnext, xnext + H);
  b_in.insert(b_in.end(), xnext + H, xnext + 2 * H);
  const auto want_a = testing::run_mixer_pieces(m, a_in.data(), H, {Ta, 1}),
             want_b = testing::run_mixer_pieces(m, b_in.data(), H, {Tb, 1});

  testing::MixerHarness harness(m);
  const auto a = harness.new_sequence(), b = harness.new_sequence();
  {  // one ragged prefill batch: 37 tokens of a, then 5 of b
    Batch batch;
    batch.add(*a, std::vector<int32_t>(size_t(Ta), 0));
    batch.add(*b, std::vector<int32_t>(size_t(Tb), 0));
    std::vector<float> y(size_t((Ta + Tb) * H));
    harness.forward(xa, batch, y.data());
    const double scale = max_abs(want_a) + max_abs(want_b);
    for (int64_t i = 0; i < Ta * H; ++i) ASSERT_NEAR(y[size_t(i)], want_a[size_t(i)], 1e-5 * (1 + scale)) << i;
    for (int64_t i = 0; i < Tb * H; ++i)
      ASSERT_NEAR(y[size_t(Ta * H + i)], want_b[size_t(i)], 1e-5 * (1 + scale)) << i;
  }
  Batch batch;  // then one batched decode step
  batch.add(*a, std::vector<int32_t>(1, 0));
  batch.add(*b, std::vector<int32_t>(1, 0));
  std::vector<float> got(size_t(2 * H));
  harness.forward(xnext, batch, got.data());
  for (int64_t i = 0; i < H; ++i) {
    EXPECT_NEAR(got[size_t(i)], want_a[size_t(Ta * H + i)], 1e-5 * (1 + std::fabs(want_a[size_t(Ta * H + i)])));
    EXPECT_NEAR(got[size_t(H + i)], want_b[size_t(Tb * H + i)], 1e-5 * (1 + std::fabs(want_b[size_t(Tb * H + i)])));
  }
}

TEST(KdaMixer, TraceReportsEveryHeadsStateNorm) {
  KdaFixture f;
  const KdaMixer m = f.build();
  HostTensor x(DType::f32, {12, f.c.hidden}, 41);
  const LayerTrace trace = testing::trace_after_prefill(m, x.view.ptr<float>(), 12, f.c.hidden);
  EXPECT_EQ(trace.kind, "linear_attention");
  ASSERT_EQ(int64_t(trace.state_norms.size()), f.c.num_heads);
  for (float n : trace.state_norms) EXPECT_GT(n, 0.f);
}

TEST(KdaMixer, RejectsBadWeightsNamingThem) {
  KdaFixture f;
  auto expect_named = [&](KdaWeights w, const std::string& what) {
    try {
      KdaMixer(f.c, std::move(w), "mixer");
      ADD_FAILURE() << "accepted a bad " << what;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  KdaWeights w = f.weights();
  w.f_b_proj = Linear::from_weights(f.g_a.view, {}, "f_b_proj");  // [K, hidden], not [H*K, K]
  expect_named(std::move(w), "mixer.f_b_proj.weight");
  w = f.weights();
  w.k_conv = f.norm.view;
  expect_named(std::move(w), "mixer.k_conv1d.weight");
  w = f.weights();
  w.dt_bias = f.norm.view;  // K values, not H*K
  expect_named(std::move(w), "mixer.dt_bias");
}

}  // namespace
}  // namespace attnzoo
