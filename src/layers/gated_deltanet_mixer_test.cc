#include "layers/gated_deltanet_mixer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

TEST(GatedDeltaNetMixer, RegroupsQwen3NextProjectionsPerKeyHead) {
  // H = 2 key heads of K = 2, r = 2 value heads each of V = 1: per key head qkvz holds q q k k v v z z, ba b b a a.
  GatedDeltaNetConfig c{.hidden = 1, .num_k_heads = 2, .num_v_heads = 4, .head_k_dim = 2, .head_v_dim = 1};
  std::vector<float> got;
  for (const ProjectionRun& run : qwen3_next_in_proj_runs(c))
    for (int64_t i = 0; i < run.count; ++i) got.push_back(float((run.source == 0 ? 0 : 100) + run.begin + i));
  const std::vector<float> want = {0, 1, 8, 9,          // q of heads 0, 1
                                   2, 3, 10, 11,        // k
                                   4, 5, 12, 13,        // v (value heads 0..3)
                                   6, 7, 14, 15,        // z
                                   100, 101, 104, 105,  // b
                                   102, 103, 106, 107};  // a
  EXPECT_EQ(got, want);
}

struct MixerFixture {
  GatedDeltaNetConfig c{.hidden = 32, .num_k_heads = 2, .num_v_heads = 4, .head_k_dim = 16, .head_v_dim = 8,
                        .conv_kernel = 4};
  HostTensor in{DType::f32, {c.proj_dim(), c.hidden}, 1, 0.2f}, out{DType::f32, {c.hidden, c.value_dim()}, 2, 0.2f};
  HostTensor conv{DType::bf16, {c.conv_dim(), 1, c.conv_kernel}, 3, 0.5f}, A_log{DType::f32, {c.num_v_heads}, 4},
      dt{DType::f32, {c.num_v_heads}, 5}, norm{DType::f32, {c.head_v_dim}, 6};
  GatedDeltaNetMixer build() const {
    std::vector<Linear> in_proj;
    in_proj.push_back(Linear::from_weights(in.view, {}, "in"));
    return build(std::move(in_proj), {{0, 0, c.proj_dim()}});
  }
  // The fixture's other weights beside input projections of the test's own.
  GatedDeltaNetMixer build(std::vector<Linear> in_proj, std::vector<ProjectionRun> runs) const {
    GatedDeltaNetWeights w;
    w.in_proj = std::move(in_proj);
    w.in_proj_runs = std::move(runs);
    w.out_proj = Linear::from_weights(out.view, {}, "out");
    w.conv_weight = conv.view;
    w.A_log = A_log.view;
    w.dt_bias = dt.view;
    w.norm_weight = norm.view;
    return GatedDeltaNetMixer(c, std::move(w), "mixer");
  }
};

TEST(GatedDeltaNetMixer, PiecesCarryConvTailAndStateExactly) {
  MixerFixture f;
  const GatedDeltaNetMixer m = f.build();
  HostTensor x(DType::f32, {150, f.c.hidden}, 9);
  const auto whole = testing::run_mixer_pieces(m, x.view.ptr<float>(), f.c.hidden, {150});
  double scale = 0;
  for (float v : whole) scale = std::max(scale, double(std::fabs(v)));
  ASSERT_GT(scale, 1e-3);
  for (const auto& pieces : std::vector<std::vector<int64_t>>{{1, 2, 1, 17, 64, 65}, std::vector<int64_t>(150, 1)}) {
    const auto got = testing::run_mixer_pieces(m, x.view.ptr<float>(), f.c.hidden, pieces);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], whole[i], 2e-5 * (1 + scale)) << i;
  }
  // The slot: the conv tail padded to a cache line, then the state.
  EXPECT_EQ(m.cache_spec().fixed_bytes(),
            4 * ((f.c.conv_dim() * 3 + 15) / 16 * 16 + f.c.num_v_heads * f.c.head_k_dim * f.c.head_v_dim));
  EXPECT_EQ(m.cache_spec().bytes_per_token(), 0);

  // The explainer's trace reads each value head's state norm after a forward pass.
  const LayerTrace trace = testing::trace_after_prefill(m, x.view.ptr<float>(), 20, f.c.hidden);
  EXPECT_EQ(trace.kind, "linear_attention");
  ASSERT_EQ(int64_t(trace.state_norms.size()), f.c.num_v_heads);
  for (float n : trace.state_norms) EXPECT_GT(n, 0.f);
}

TEST(GatedDeltaNetMixer, BatchedDecodeMatchesSingleSequences) {
  MixerFixture f;
  const GatedDeltaNetMixer m = f.build();
  const int64_t H = f.c.hidden;
  HostTensor x(DType::f32, {2, 10, H}, 11);
  const float* xa = x.view.ptr<float>();
  const float* xb = xa + 10 * H;
  const auto want_a = testing::run_mixer_pieces(m, xa, H, {9, 1}),
             want_b = testing::run_mixer_pieces(m, xb, H, {9, 1});
  testing::MixerHarness harness(m);
  const auto a = harness.new_sequence(), b = harness.new_sequence();
  std::vector<float> y(size_t(10 * H));
  for (Sequence* s : {a.get(), b.get()}) {
    Batch batch;
    batch.add(*s, std::vector<int32_t>(9, 0));
    harness.forward(s == a.get() ? xa : xb, batch, y.data());
  }
  Batch batch;
  batch.add(*a, std::vector<int32_t>(1, 0));
  batch.add(*b, std::vector<int32_t>(1, 0));
  std::vector<float> xin(size_t(2 * H)), got(size_t(2 * H));
  std::copy_n(xa + 9 * H, H, xin.data());
  std::copy_n(xb + 9 * H, H, xin.data() + H);
  harness.forward(xin.data(), batch, got.data());
  for (int64_t i = 0; i < H; ++i) {
    EXPECT_NEAR(got[size_t(i)], want_a[size_t(9 * H + i)], 1e-6);
    EXPECT_NEAR(got[size_t(H + i)], want_b[size_t(9 * H + i)], 1e-6);
  }
}

TEST(GatedDeltaNetMixer, SplitSourcesRegroupedPerTokenMatchOneFusedProjection) {
  // Qwen3-Next's two checkpoint projections, against one projection whose rows were put in q k v z b a order.
  MixerFixture f;
  const auto& c = f.c;
  const int64_t Hd = c.hidden, r = c.num_v_heads / c.num_k_heads;
  HostTensor qkvz(DType::f32, {c.conv_dim() + c.value_dim(), Hd}, 21, 0.2f), ba(DType::f32, {2 * c.num_v_heads, Hd}, 22, 0.2f);
  HostTensor fused(DType::f32, {c.proj_dim(), Hd}, 0, 0.f);
  int64_t row = 0;
  for (const ProjectionRun& run : qwen3_next_in_proj_runs(c))
    for (int64_t i = 0; i < run.count; ++i, ++row)
      std::copy_n((run.source == 0 ? qkvz : ba).view.ptr<float>() + (run.begin + i) * Hd, Hd,
                  fused.view.ptr<float>() + row * Hd);
  auto build = [&](bool split) {
    std::vector<Linear> in_proj;
    if (!split) {
      in_proj.push_back(Linear::from_weights(fused.view, {}, "fused"));
      return f.build(std::move(in_proj), {{0, 0, c.proj_dim()}});
    }
    in_proj.push_back(Linear::from_weights(qkvz.view, {}, "qkvz"));
    in_proj.push_back(Linear::from_weights(ba.view, {}, "ba"));
    return f.build(std::move(in_proj), qwen3_next_in_proj_runs(c));
  };
  EXPECT_EQ(r, 2);
  HostTensor x(DType::f32, {70, Hd}, 23);
  const auto a = testing::run_mixer_pieces(build(true), x.view.ptr<float>(), Hd, {69, 1});
  const auto b = testing::run_mixer_pieces(build(false), x.view.ptr<float>(), Hd, {69, 1});
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i]))) << i;
}

TEST(GatedDeltaNetMixer, QkvAndZApartMatchQwen3NextsFusedQkvz) {
  // A GGUF whose attn_qkv and attn_gate differ in type: in_proj_qkvz's rows split as the converter splits them
  // ([all q; all k; all v] and [all z], key head by key head) and read beside in_proj_ba must give the fused
  // projection's outputs.
  MixerFixture f;
  const auto& c = f.c;
  const int64_t Hd = c.hidden, nk = c.num_k_heads, K = c.head_k_dim, vz = c.value_dim() / nk;
  const int64_t group = 2 * K + 2 * vz;
  HostTensor qkvz(DType::f32, {c.conv_dim() + c.value_dim(), Hd}, 31, 0.2f), ba(DType::f32, {2 * c.num_v_heads, Hd}, 32, 0.2f);
  HostTensor qkv(DType::f32, {c.conv_dim(), Hd}, 0, 0.f), z(DType::f32, {c.value_dim(), Hd}, 0, 0.f);
  auto take = [&](HostTensor& dst, int64_t& row, int64_t first, int64_t n) {
    std::copy_n(qkvz.view.ptr<float>() + first * Hd, n * Hd, dst.view.ptr<float>() + row * Hd);
    row += n;
  };
  int64_t qr = 0, zr = 0;
  for (int64_t h = 0; h < nk; ++h) take(qkv, qr, h * group, K);            // q
  for (int64_t h = 0; h < nk; ++h) take(qkv, qr, h * group + K, K);        // k
  for (int64_t h = 0; h < nk; ++h) take(qkv, qr, h * group + 2 * K, vz);   // v
  for (int64_t h = 0; h < nk; ++h) take(z, zr, h * group + 2 * K + vz, vz);
  ASSERT_EQ(qr, c.conv_dim());
  ASSERT_EQ(zr, c.value_dim());
  auto build = [&](bool apart) {
    std::vector<Linear> in_proj;
    if (!apart) {
      in_proj.push_back(Linear::from_weights(qkvz.view, {}, "qkvz"));
      in_proj.push_back(Linear::from_weights(ba.view, {}, "ba"));
      return f.build(std::move(in_proj), qwen3_next_in_proj_runs(c));
    }
    in_proj.push_back(Linear::from_weights(qkv.view, {}, "qkv"));
    in_proj.push_back(Linear::from_weights(z.view, {}, "z"));
    in_proj.push_back(Linear::from_weights(ba.view, {}, "ba"));
    return f.build(std::move(in_proj), qwen3_next_split_in_proj_runs(c));
  };
  HostTensor x(DType::f32, {40, Hd}, 33);
  const auto a = testing::run_mixer_pieces(build(true), x.view.ptr<float>(), Hd, {39, 1});
  const auto b = testing::run_mixer_pieces(build(false), x.view.ptr<float>(), Hd, {39, 1});
  double scale = 0;
  for (float v : b) scale = std::max(scale, double(std::fabs(v)));
  ASSERT_GT(scale, 1e-3);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6 * (1 + std::fabs(b[i]))) << i;
}

TEST(GatedDeltaNetMixer, RejectsBadWeightsNamingThem) {
  MixerFixture f;
  f.c.num_v_heads = 3;  // not a multiple of the key heads
  EXPECT_THROW(f.build(), ArgumentError);
  MixerFixture g;
  GatedDeltaNetWeights w;
  w.in_proj.push_back(Linear::from_weights(g.in.view, {}, "in"));
  w.in_proj_runs = {{0, 0, g.c.proj_dim()}};
  w.out_proj = Linear::from_weights(g.out.view, {}, "out");
  w.conv_weight = g.norm.view;  // wrong shape
  w.A_log = g.A_log.view;
  w.dt_bias = g.dt.view;
  w.norm_weight = g.norm.view;
  try {
    GatedDeltaNetMixer(g.c, std::move(w), "mixer");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("mixer.conv1d.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
