#include "layers/mamba_mixer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(MambaTranspose, RowsToChannelsAndBack) {
  for (int64_t n : {1, 5, 33, 70})
    for (int64_t cols : {3, 32, 45}) {
      const int64_t stride = cols + 7;
      testing::HostTensor src(DType::f32, {n * stride}, uint64_t(n * 100 + cols));
      const float* s = src.view.ptr<float>();
      std::vector<float> cm(size_t(n * cols)), back(size_t(n * stride), -1.f);
      rows_to_channels(s, stride, n, cols, cm.data());
      for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(cm[size_t(c * n + t)], s[t * stride + c]);
      channels_to_rows(cm.data(), n, cols, back.data(), stride);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < stride; ++c) ASSERT_EQ(back[size_t(t * stride + c)], c < cols ? s[t * stride + c] : -1.f);
    }
}

struct MambaFixture {
  MambaMixerConfig c;
  testing::HostTensor in_proj, x_proj, dt_proj, out_proj, conv_w, conv_b, dt_bias, A_log, D;
  MambaFixture(int64_t width, bool falcon)
      : c(config(width, falcon)), in_proj(DType::f32, {2 * c.inner, c.hidden}, 1, 0.3f),
        x_proj(DType::f32, {c.x_proj_dim(), c.inner}, 2, 0.3f), dt_proj(DType::f32, {c.inner, c.dt_rank}, 3, 0.4f),
        out_proj(DType::f32, {c.hidden, c.inner}, 4, 0.2f), conv_w(DType::f32, {c.inner, 1, c.conv_kernel}, 5, 0.5f),
        conv_b(DType::f32, {c.inner}, 6, 0.2f), dt_bias(DType::f32, {c.inner}, 7, 0.5f),
        A_log(DType::f32, {c.inner, c.state_size}, 8, 0.5f), D(DType::f32, {c.inner}, 9) {}
  static MambaMixerConfig config(int64_t width, bool falcon) {
    MambaMixerConfig c;
    c.hidden = 16, c.inner = 40, c.state_size = 6, c.dt_rank = 3, c.conv_kernel = width;
    c.bcdt_rms_norm = falcon, c.mixer_rms_eps = 1e-5f;
    return c;
  }
  MambaMixerWeights weights() const {
    MambaMixerWeights w;
    w.in_proj = Linear::from_weights(in_proj.view, {}, "in_proj");
    w.x_proj = Linear::from_weights(x_proj.view, {}, "x_proj");
    w.dt_proj = Linear::from_weights(dt_proj.view, {}, "dt_proj");
    w.out_proj = Linear::from_weights(out_proj.view, {}, "out_proj");
    w.conv_weight = conv_w.view, w.conv_bias = conv_b.view, w.dt_bias = dt_bias.view, w.A_log = A_log.view;
    w.D = D.view;
    return w;
  }
  std::unique_ptr<MambaMixer> make() const { return std::make_unique<MambaMixer>(c, weights(), "mixer"); }

  // The mixer written out plainly in double precision over one whole sequence x [T, hidden].
  std::vector<float> reference(const std::vector<float>& x, int64_t T) const {
    const int64_t Hd = c.hidden, E = c.inner, N = c.state_size, R = c.dt_rank, W = c.conv_kernel;
    auto f = [](const testing::HostTensor& t, int64_t i) { return double(t.view.ptr<float>()[i]); };
    auto silu = [](double v) { return v / (1 + std::exp(-v)); };
    std::vector<double> xz(size_t(T * 2 * E)), xc(size_t(T * E)), h(size_t(E * N), 0.0), y(static_cast<size_t>(E));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < 2 * E; ++o) {
        double s = 0;
        for (int64_t i = 0; i < Hd; ++i) s += f(in_proj, o * Hd + i) * x[size_t(t * Hd + i)];
        xz[size_t(t * 2 * E + o)] = s;
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < E; ++d) {
        double s = f(conv_b, d);
        for (int64_t k = 0; k < W; ++k) {
          const int64_t src = t - (W - 1) + k;
          if (src >= 0) s += f(conv_w, d * W + k) * xz[size_t(src * 2 * E + d)];
        }
        xc[size_t(t * E + d)] = silu(s);
      }
    auto rms = [&](std::vector<double>& v, int64_t begin, int64_t n) {
      if (!c.bcdt_rms_norm) return;
      double ss = 0;
      for (int64_t i = begin; i < begin + n; ++i) ss += v[size_t(i)] * v[size_t(i)];
      const double inv = 1 / std::sqrt(ss / double(n) + c.mixer_rms_eps);
      for (int64_t i = begin; i < begin + n; ++i) v[size_t(i)] *= inv;
    };
    std::vector<float> out(size_t(T * Hd));
    std::vector<double> dbl(size_t(c.x_proj_dim()));
    for (int64_t t = 0; t < T; ++t) {
      const double* u = xc.data() + t * E;
      for (int64_t o = 0; o < c.x_proj_dim(); ++o) {
        double s = 0;
        for (int64_t i = 0; i < E; ++i) s += f(x_proj, o * E + i) * u[i];
        dbl[size_t(o)] = s;
      }
      rms(dbl, 0, R), rms(dbl, R, N), rms(dbl, R + N, N);
      for (int64_t d = 0; d < E; ++d) {
        double dt = f(dt_bias, d);
        for (int64_t r = 0; r < R; ++r) dt += f(dt_proj, d * R + r) * dbl[size_t(r)];
        dt = dt > 20 ? dt : std::log1p(std::exp(dt));
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = h[size_t(d * N + n)];
          s = std::exp(-std::exp(f(A_log, d * N + n)) * dt) * s + dt * dbl[size_t(R + n)] * u[d];
          acc += s * dbl[size_t(R + N + n)];
        }
        y[size_t(d)] = (acc + f(D, d) * u[d]) * silu(xz[size_t(t * 2 * E + E + d)]);
      }
      for (int64_t o = 0; o < Hd; ++o) {
        double s = 0;
        for (int64_t i = 0; i < E; ++i) s += f(out_proj, o * E + i) * y[size_t(i)];
        out[size_t(t * Hd + o)] = float(s);
      }
    }
    return out;
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, size_t offset = 0) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[offset + i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << "at " << i;
}

TEST(MambaMixer, MatchesReferenceInPiecesDecodeAndRaggedBatches) {
  for (bool falcon : {false, true})
    for (int64_t width : {2, 4}) {
      SCOPED_TRACE(std::string(falcon ? "falcon" : "mamba") + " width " + std::to_string(width));
      MambaFixture f(width, falcon);
      auto mixer = f.make();
      const int64_t T = 70, Hd = f.c.hidden;
      testing::HostTensor xs(DType::f32, {T * Hd}, 11);
      const std::vector<float> x(xs.view.ptr<float>(), xs.view.ptr<float>() + T * Hd);
      const std::vector<float> want = f.reference(x, T);
      const std::vector<float> whole = testing::run_mixer_pieces(*mixer, x.data(), Hd, {T});
      expect_close(whole, want);
      expect_close(testing::run_mixer_pieces(*mixer, x.data(), Hd, {1, 17, 1, 1, 30, 20}), whole);
      expect_close(testing::run_mixer_pieces(*mixer, x.data(), Hd, std::vector<int64_t>(size_t(T), 1)), whole);  // decode only

      // Three sequences in one call (a 40-token prefill, a decode token, a 7-token prefill), then all three
      // decoding together (the parallel-over-sequences schedule): each matches running it alone.
      testing::MixerHarness harness(*mixer);
      const auto a = harness.new_sequence(), b = harness.new_sequence(), d = harness.new_sequence();
      Batch first;
      const std::vector<int32_t> ids40(40, 0), ids1(1, 0), ids7(7, 0);
      first.add(*a, ids40), first.add(*b, ids1), first.add(*d, ids7);
      std::vector<float> xx(x.begin(), x.begin() + 40 * Hd);
      xx.insert(xx.end(), x.begin() + 40 * Hd, x.begin() + 41 * Hd);
      xx.insert(xx.end(), x.begin() + 50 * Hd, x.begin() + 57 * Hd);
      std::vector<float> out(xx.size());
      harness.forward(xx.data(), first, out.data());
      expect_close(out, std::vector<float>(whole.begin(), whole.begin() + 40 * Hd));
      const std::vector<float> b_alone = testing::run_mixer_pieces(*mixer, x.data() + 40 * Hd, Hd, {2});
      const std::vector<float> d_alone = testing::run_mixer_pieces(*mixer, x.data() + 50 * Hd, Hd, {8});
      expect_close(out, std::vector<float>(b_alone.begin(), b_alone.begin() + Hd), size_t(40 * Hd));
      expect_close(out, std::vector<float>(d_alone.begin(), d_alone.begin() + 7 * Hd), size_t(41 * Hd));
      Batch step;
      step.add(*a, ids1), step.add(*b, ids1), step.add(*d, ids1);
      std::vector<float> xs3(x.begin() + 40 * Hd, x.begin() + 41 * Hd);
      xs3.insert(xs3.end(), x.begin() + 41 * Hd, x.begin() + 42 * Hd);
      xs3.insert(xs3.end(), x.begin() + 57 * Hd, x.begin() + 58 * Hd);
      std::vector<float> out3(xs3.size());
      harness.forward(xs3.data(), step, out3.data());
      expect_close(out3, std::vector<float>(whole.begin() + 40 * Hd, whole.begin() + 41 * Hd));
      expect_close(out3, std::vector<float>(b_alone.begin() + Hd, b_alone.end()), size_t(Hd));
      expect_close(out3, std::vector<float>(d_alone.begin() + 7 * Hd, d_alone.end()), size_t(2 * Hd));
      EXPECT_EQ(mixer->cache_spec().fixed_bytes(), a->bytes());
      EXPECT_EQ(a->bytes(), int64_t(4 * ((f.c.inner * (width - 1) + 15) / 16 * 16 + f.c.inner * f.c.state_size)));
    }
}

TEST(MambaMixer, RejectsMisshapenWeights) {
  MambaFixture f(4, false);
  auto expect_named = [&](MambaMixerConfig c, MambaMixerWeights w, const std::string& what) {
    try {
      MambaMixer(c, std::move(w), "m");
      FAIL() << what;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  MambaMixerConfig c = f.c;
  c.conv_kernel = 3;
  expect_named(c, f.weights(), "m.conv1d.weight");
  c = f.c;
  c.dt_rank = 4;
  expect_named(c, f.weights(), "m.x_proj.weight");
  MambaMixerWeights w = f.weights();
  w.A_log = f.D.view;
  expect_named(f.c, std::move(w), "m.A_log");
  w = f.weights();
  w.dt_proj = Linear::from_weights(f.dt_proj.view, f.dt_bias.view, "dt_proj");
  expect_named(f.c, std::move(w), "m.dt_proj");
  w = f.weights();
  w.D = {};
  expect_named(f.c, std::move(w), "m.D");
}

}  // namespace
}  // namespace attnzoo
