#include "layers/lightning_attention_mixer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

struct LightningFixture {
  LightningAttentionConfig c;
  testing::HostTensor qkv, gate, out, norm;
  LightningFixture()
      : c(config()), qkv(DType::f32, {3 * c.inner(), c.hidden}, 1, 0.3f),
        gate(DType::f32, {c.inner(), c.hidden}, 2, 0.3f), out(DType::f32, {c.hidden, c.inner()}, 3, 0.2f),
        norm(DType::f32, {c.inner()}, 4, 0.5f) {}
  static LightningAttentionConfig config() {
    LightningAttentionConfig c;
    c.hidden = 24, c.heads = 3, c.head_dim = 8;
    c.slopes = minimax_slopes(c.heads, 1, 4);
    return c;
  }
  LightningAttentionWeights weights() const {
    LightningAttentionWeights w;
    w.qkv_proj = Linear::from_weights(qkv.view, {}, "qkv_proj");
    w.output_gate = Linear::from_weights(gate.view, {}, "output_gate");
    w.out_proj = Linear::from_weights(out.view, {}, "out_proj");
    w.norm = norm.view;
    return w;
  }

  // The layer written out plainly in double precision over one whole sequence x [T, hidden]: the token-by-token
  // recurrence S = exp(-slope) S + k^T v, o = q S (transformers' decode branch), then norm, gate, out_proj.
  std::vector<float> reference(const float* x, int64_t T) const {
    const int64_t Hd = c.hidden, H = c.heads, D = c.head_dim, I = c.inner();
    auto f = [](const testing::HostTensor& t, int64_t i) { return double(t.view.ptr<float>()[i]); };
    auto matvec = [&](const testing::HostTensor& w, int64_t rows, int64_t cols, const double* v, double* y) {
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t i = 0; i < cols; ++i) s += f(w, r * cols + i) * v[i];
        y[r] = s;
      }
    };
    std::vector<double> S(size_t(H * D * D), 0.0), xt(static_cast<size_t>(Hd)), p(static_cast<size_t>(3 * I)),
        o(static_cast<size_t>(I)), g(static_cast<size_t>(I)), y(static_cast<size_t>(Hd));
    std::vector<float> result(size_t(T * Hd));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < Hd; ++i) xt[size_t(i)] = x[t * Hd + i];
      matvec(qkv, 3 * I, Hd, xt.data(), p.data());
      for (double& v : p) v = v / (1 + std::exp(-v));
      for (int64_t h = 0; h < H; ++h) {
        const double* q = p.data() + h * 3 * D;
        const double* k = q + D;
        const double* v = q + 2 * D;
        const double decay = std::exp(-double(c.slopes[size_t(h)]));
        for (int64_t a = 0; a < D; ++a)
          for (int64_t b = 0; b < D; ++b) {
            double& s = S[size_t((h * D + a) * D + b)];
            s = decay * s + k[a] * v[b];
          }
        for (int64_t b = 0; b < D; ++b) {
          double acc = 0;
          for (int64_t a = 0; a < D; ++a) acc += q[a] * S[size_t((h * D + a) * D + b)];
          o[size_t(h * D + b)] = acc;
        }
      }
      double ss = 0;
      for (double v : o) ss += v * v;
      const double inv = 1 / std::sqrt(ss / double(I) + c.norm_eps);
      matvec(gate, I, Hd, xt.data(), g.data());
      for (int64_t i = 0; i < I; ++i) o[size_t(i)] *= inv * f(norm, i) / (1 + std::exp(-g[size_t(i)]));
      matvec(out, Hd, I, o.data(), y.data());
      for (int64_t i = 0; i < Hd; ++i) result[size_t(t * Hd + i)] = float(y[size_t(i)]);
    }
    return result;
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, size_t offset = 0) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[offset + i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << "at " << i;
}

TEST(LightningAttention, SlopesAreAlibisScaledByDepth) {
  const std::vector<float> first = minimax_slopes(8, 0, 5), last = minimax_slopes(8, 4, 5);
  for (int64_t h = 0; h < 8; ++h) {
    EXPECT_NEAR(first[size_t(h)], std::pow(0.5, double(h + 1)) * (1 + 1e-5), 1e-7);  // 2^(-8/8 (h + 1))
    EXPECT_NEAR(last[size_t(h)], std::pow(0.5, double(h + 1)) * (1 - 4 / (4 + 1e-5) + 1e-5), 1e-9);
  }
}

TEST(LightningAttention, MatchesTheRecurrenceInPiecesDecodeAndRaggedBatches) {
  LightningFixture f;
  const LightningAttentionMixer mixer(f.c, f.weights(), "attn");
  const int64_t T = 150, Hd = f.c.hidden;  // past two 64-token chunks
  testing::HostTensor xs(DType::f32, {T * Hd}, 11);
  const float* x = xs.view.ptr<float>();
  const std::vector<float> want = f.reference(x, T);
  expect_close(testing::run_mixer_pieces(mixer, x, Hd, {T}), want);
  expect_close(testing::run_mixer_pieces(mixer, x, Hd, {1, 70, 1, 1, 77}), want);
  expect_close(testing::run_mixer_pieces(mixer, x, Hd, std::vector<int64_t>(40, 1)),
               std::vector<float>(want.begin(), want.begin() + 40 * Hd));

  // A 30-token prefill beside a decode token of a sequence that holds 9, in one call; then both decode together.
  testing::MixerHarness harness(mixer);
  const auto a = harness.new_sequence(), b = harness.new_sequence();
  Batch first;
  const std::vector<int32_t> ids9(9, 0), ids30(30, 0), ids1(1, 0);
  first.add(*b, ids9);
  std::vector<float> out9(size_t(9 * Hd));
  harness.forward(x, first, out9.data());
  Batch mixed;
  mixed.add(*a, ids30), mixed.add(*b, ids1);
  std::vector<float> xm(x, x + 30 * Hd);
  xm.insert(xm.end(), x + 9 * Hd, x + 10 * Hd);
  std::vector<float> outm(xm.size());
  harness.forward(xm.data(), mixed, outm.data());
  expect_close(outm, std::vector<float>(want.begin(), want.begin() + 30 * Hd));
  expect_close(outm, std::vector<float>(want.begin() + 9 * Hd, want.begin() + 10 * Hd), size_t(30 * Hd));
  Batch step;
  step.add(*a, ids1), step.add(*b, ids1);
  std::vector<float> xs2(x + 30 * Hd, x + 31 * Hd);
  xs2.insert(xs2.end(), x + 10 * Hd, x + 11 * Hd);
  std::vector<float> out2(xs2.size());
  harness.forward(xs2.data(), step, out2.data());
  expect_close(out2, std::vector<float>(want.begin() + 30 * Hd, want.begin() + 31 * Hd));
  expect_close(out2, std::vector<float>(want.begin() + 10 * Hd, want.begin() + 11 * Hd), size_t(Hd));
  EXPECT_EQ(mixer.cache_spec().fixed_bytes(), int64_t(4 * 3 * 8 * 8));
}

TEST(LightningAttention, RejectsMisshapenWeights) {
  LightningFixture f;
  auto expect_named = [&](LightningAttentionConfig c, LightningAttentionWeights w, const std::string& what) {
    try {
      LightningAttentionMixer(c, std::move(w), "m");
      FAIL() << what;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  LightningAttentionConfig c = f.c;
  c.head_dim = 4;
  expect_named(c, f.weights(), "m.qkv_proj.weight");
  c = f.c;
  c.slopes.pop_back();
  expect_named(c, f.weights(), "slopes");
  LightningAttentionWeights w = f.weights();
  w.norm = {};
  expect_named(f.c, std::move(w), "m.norm.weight");
}

}  // namespace
}  // namespace attnzoo
