#include "layers/mamba2_mixer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "layers/parallel_mixer.h"
#include "layers/short_conv_mixer.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(GatedRmsNorm, MatchesReferenceForGroupsAndGateOrder) {
  for (int64_t groups : {1, 2, 4})
    for (bool before : {false, true}) {
      const int64_t rows = 3, inner = 32, zs = inner + 5;
      testing::HostTensor y(DType::f32, {rows * inner}, 1, 2.f), z(DType::f32, {rows * zs}, 2), w(DType::f32, {inner}, 3);
      std::vector<float> got(y.view.ptr<float>(), y.view.ptr<float>() + rows * inner), want = got;
      gated_rms_norm(got.data(), z.view.ptr<float>(), rows, inner, zs, groups, w.view.ptr<float>(), 1e-5f, before);
      gated_rms_norm_reference(want.data(), z.view.ptr<float>(), rows, inner, zs, groups, w.view.ptr<float>(), 1e-5f,
                               before);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
    }
}

struct Mamba2Fixture {
  Mamba2MixerConfig c;
  testing::HostTensor in_proj, out_proj, conv_w, conv_b, dt_bias, A_log, D, norm_w;
  Mamba2Fixture(int64_t groups, int64_t width)
      : c(config(groups, width)), in_proj(DType::f32, {c.proj_dim(), c.hidden}, 1, 0.2f),
        out_proj(DType::f32, {c.hidden, c.inner()}, 2, 0.2f), conv_w(DType::f32, {c.conv_dim(), 1, c.conv_kernel}, 3, 0.5f),
        conv_b(DType::f32, {c.conv_dim()}, 4, 0.2f), dt_bias(DType::f32, {c.num_heads}, 5, 0.3f),
        A_log(DType::f32, {c.num_heads}, 6, 0.3f), D(DType::f32, {c.num_heads}, 7), norm_w(DType::f32, {c.inner()}, 8) {}
  static Mamba2MixerConfig config(int64_t groups, int64_t width) {
    Mamba2MixerConfig c;
    c.hidden = 16, c.num_heads = 4, c.head_dim = 8, c.n_groups = groups, c.state_size = 6, c.conv_kernel = width;
    c.norm_groups = groups;
    return c;
  }
  std::unique_ptr<Mamba2Mixer> make() const {
    Mamba2MixerWeights w;
    w.in_proj = Linear::from_weights(in_proj.view, {}, "in_proj");
    w.out_proj = Linear::from_weights(out_proj.view, {}, "out_proj");
    w.conv_weight = conv_w.view, w.conv_bias = conv_b.view, w.dt_bias = dt_bias.view, w.A_log = A_log.view;
    w.D = D.view, w.norm_weight = norm_w.view;
    return std::make_unique<Mamba2Mixer>(c, std::move(w), "mixer");
  }
};

TEST(Mamba2Mixer, PiecesAndRaggedBatchesMatchOneShot) {
  for (int64_t groups : {1, 2})
    for (int64_t width : {2, 4}) {
      Mamba2Fixture f(groups, width);
      auto mixer = f.make();
      const int64_t T = 40, Hd = f.c.hidden;
      testing::HostTensor xs(DType::f32, {T * Hd}, 9);
      const std::vector<float> x(xs.view.ptr<float>(), xs.view.ptr<float>() + T * Hd);
      const std::vector<float> whole = testing::run_mixer_pieces(*mixer, x.data(), Hd, {T});
      const std::vector<float> pieces = testing::run_mixer_pieces(*mixer, x.data(), Hd, {1, 2, 17, 1, 19});
      for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(pieces[i], whole[i], 1e-5 * (1 + std::fabs(whole[i])));
      // Two sequences in one ragged call: the second's output equals running it alone.
      testing::MixerHarness harness(*mixer);
      const auto a = harness.new_sequence(), b = harness.new_sequence();
      Batch batch;
      std::vector<int32_t> ids_a(size_t(T), 0), ids_b(7, 0);
      batch.add(*a, ids_a);
      batch.add(*b, ids_b);
      std::vector<float> xx(x);
      xx.insert(xx.end(), x.begin(), x.begin() + 7 * Hd);
      std::vector<float> out(xx.size());
      harness.forward(xx.data(), batch, out.data());
      for (int64_t i = 0; i < T * Hd; ++i) ASSERT_NEAR(out[size_t(i)], whole[size_t(i)], 1e-5 * (1 + std::fabs(whole[size_t(i)])));
      const std::vector<float> alone = testing::run_mixer_pieces(*mixer, x.data(), Hd, {7});
      for (int64_t i = 0; i < 7 * Hd; ++i) ASSERT_NEAR(out[size_t(T * Hd + i)], alone[size_t(i)], 1e-5 * (1 + std::fabs(alone[size_t(i)])));
      EXPECT_EQ(mixer->cache_spec().fixed_bytes(), a->bytes());
    }
}

TEST(Mamba2Mixer, RejectsMisshapenWeights) {
  Mamba2Fixture f(2, 4);
  Mamba2MixerWeights w;
  w.in_proj = Linear::from_weights(f.in_proj.view, {}, "in_proj");
  w.out_proj = Linear::from_weights(f.out_proj.view, {}, "out_proj");
  w.conv_weight = f.conv_w.view, w.dt_bias = f.dt_bias.view, w.A_log = f.A_log.view, w.D = f.D.view;
  w.norm_weight = f.norm_w.view;
  Mamba2MixerConfig c = f.c;
  c.n_groups = 3;
  EXPECT_THROW(Mamba2Mixer(c, w, "m"), ArgumentError);
  c = f.c;
  c.conv_kernel = 3;
  try {
    Mamba2Mixer(c, w, "m");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("m.conv1d.weight"), std::string::npos);
  }
}

TEST(ParallelMixer, SumsScaledBranchesAndKeepsItsState) {
  Mamba2Fixture f(1, 3);
  std::vector<ParallelBranch> branches;
  branches.push_back({f.make(), 0.5f, 2.f});
  branches.push_back({f.make(), 1.f, -1.f});
  ParallelMixer par(f.c.hidden, std::move(branches));
  const int64_t T = 20, Hd = f.c.hidden;
  testing::HostTensor xs(DType::f32, {T * Hd}, 10);
  const std::vector<float> x(xs.view.ptr<float>(), xs.view.ptr<float>() + T * Hd);
  std::vector<float> half(x);
  for (float& v : half) v *= 0.5f;
  auto single = f.make();
  const std::vector<float> a = testing::run_mixer_pieces(*single, half.data(), Hd, {T});
  const std::vector<float> b = testing::run_mixer_pieces(*single, x.data(), Hd, {T});
  const std::vector<float> got = testing::run_mixer_pieces(par, x.data(), Hd, {3, 1, 16});
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], 2.f * a[i] - b[i], 1e-5 * (1 + std::fabs(b[i])));
  EXPECT_EQ(par.kind(), "mamba2+mamba2");
  EXPECT_EQ(par.cache_spec().fixed_bytes(), 2 * single->cache_spec().fixed_bytes());
}

}  // namespace
}  // namespace attnzoo
