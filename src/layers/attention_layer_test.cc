// AttentionLayer end to end (projections, RoPE, cache, kernels, output projection) against a plain double
// definition written here, for the options other families need: softcap, sinks, the Qwen3-Next output gate,
// sliding windows, Llama 4's query temperature; prefill in one shot, in chunks and token by token must all agree with it.
#include "layers/attention_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

struct Case {
  int64_t hidden = 24, heads = 4, kv_heads = 2, head_dim = 8, window = 0;
  float softcap = 0.f;
  bool sinks = false, gate = false, qk_norm = false;
  float temperature_beta = 0.f;
  int64_t temperature_interval = 0;
};

struct Weights {
  HostTensor wq, wk, wv, wo, qn, kn, sinks;
  explicit Weights(const Case& c)
      : wq(DType::f32, {c.heads * c.head_dim * (c.gate ? 2 : 1), c.hidden}, 1, 0.3f),
        wk(DType::f32, {c.kv_heads * c.head_dim, c.hidden}, 2, 0.3f),
        wv(DType::f32, {c.kv_heads * c.head_dim, c.hidden}, 3, 0.3f),
        wo(DType::f32, {c.hidden, c.heads * c.head_dim}, 4, 0.3f),
        qn(DType::f32, {c.head_dim}, 5, 0.5f),
        kn(DType::f32, {c.head_dim}, 6, 0.5f),
        sinks(DType::f32, {c.heads}, 7, 1.f) {}
};

AttentionLayer make_layer(const Case& c, const Weights& w, const Rope& rope) {
  AttentionConfig ac{c.hidden, c.heads, c.kv_heads, c.head_dim, c.window};
  ac.softcap = c.softcap;
  ac.output_gate = c.gate;
  ac.temperature_beta = c.temperature_beta;
  ac.temperature_interval = c.temperature_interval;
  std::optional<RmsNorm> qn, kn;
  if (c.qk_norm) {
    qn.emplace(w.qn.view, 1e-6f, true, "q_norm");
    kn.emplace(w.kn.view, 1e-6f, true, "k_norm");
  }
  AttentionLayer layer(ac, Linear::from_weights(w.wq.view, {}, "q"), Linear::from_weights(w.wk.view, {}, "k"),
                       Linear::from_weights(w.wv.view, {}, "v"), Linear::from_weights(w.wo.view, {}, "o"),
                       std::move(qn), std::move(kn), rope, "attn");
  if (c.sinks) layer.set_sinks(w.sinks.view, "attn.sinks");
  return layer;
}

std::vector<double> project(const HostTensor& w, const float* x, int64_t T) {
  const int64_t N = w.view.shape[0], K = w.view.shape[1];
  std::vector<double> y(size_t(T * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(w.at(n * K + k)) * x[t * K + k];
      y[size_t(t * N + n)] = s;
    }
  return y;
}

void norm_rows(std::vector<double>& v, int64_t D, const HostTensor& w) {
  for (size_t r = 0; r < v.size() / size_t(D); ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += v[r * D + d] * v[r * D + d];
    const double inv = 1.0 / std::sqrt(ss / double(D) + 1e-6);
    for (int64_t d = 0; d < D; ++d) v[r * D + d] *= inv * (1.0 + w.at(d));
  }
}

void rope_rows(std::vector<double>& v, int64_t T, int64_t heads, int64_t D, const Rope& rope) {
  const auto& inv = rope.inv_freq();
  const int64_t half = D / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      double* x = v.data() + (t * heads + h) * D;
      for (int64_t i = 0; i < half; ++i) {
        const double a = double(t) * double(inv[size_t(i)]), c = std::cos(a), s = std::sin(a);
        const double x0 = x[i], x1 = x[i + half];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x1 * c + x0 * s;
      }
    }
}

// The whole layer over T tokens at positions 0..T-1, in double.
std::vector<double> reference(const Case& c, const Weights& w, const Rope& rope, const std::vector<float>& x,
                              int64_t T) {
  const int64_t D = c.head_dim, H = c.heads, Hk = c.kv_heads;
  std::vector<double> qg = project(w.wq, x.data(), T), k = project(w.wk, x.data(), T), v = project(w.wv, x.data(), T);
  std::vector<double> q(size_t(T * H * D)), gate(size_t(T * H * D));
  for (int64_t r = 0; r < T * H; ++r)
    for (int64_t d = 0; d < D; ++d) {
      q[size_t(r * D + d)] = c.gate ? qg[size_t(r * 2 * D + d)] : qg[size_t(r * D + d)];
      if (c.gate) gate[size_t(r * D + d)] = qg[size_t(r * 2 * D + D + d)];
    }
  if (c.qk_norm) {
    norm_rows(q, D, w.qn);
    norm_rows(k, D, w.kn);
  }
  rope_rows(q, T, H, D, rope);
  rope_rows(k, T, Hk, D, rope);
  if (c.temperature_beta != 0.f)  // query t scaled by 1 + beta * log(1 + floor(t / interval))
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < H * D; ++i)
        q[size_t(t * H * D + i)] *= 1.0 + c.temperature_beta * std::log(1.0 + double(t / c.temperature_interval));
  std::vector<float> attn(size_t(T * H * D));
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hk);
      std::vector<double> s(size_t(t + 1), -INFINITY);
      double m = c.sinks ? double(w.sinks.at(h)) : -INFINITY;
      for (int64_t j = 0; j <= t; ++j) {
        if (c.window > 0 && j <= t - c.window) continue;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[size_t((t * H + h) * D + d)] * k[size_t((j * Hk + g) * D + d)];
        dot *= scale;
        if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
        s[size_t(j)] = dot;
        m = std::max(m, dot);
      }
      double den = c.sinks ? std::exp(double(w.sinks.at(h)) - m) : 0.0;
      std::vector<double> o(size_t(D), 0.0);
      for (int64_t j = 0; j <= t; ++j) {
        if (s[size_t(j)] == -INFINITY) continue;
        const double p = std::exp(s[size_t(j)] - m);
        den += p;
        for (int64_t d = 0; d < D; ++d) o[size_t(d)] += p * v[size_t((j * Hk + g) * D + d)];
      }
      for (int64_t d = 0; d < D; ++d) {
        double val = o[size_t(d)] / den;
        if (c.gate) val *= 1.0 / (1.0 + std::exp(-gate[size_t((t * H + h) * D + d)]));
        attn[size_t((t * H + h) * D + d)] = float(val);
      }
    }
  return project(w.wo, attn.data(), T);
}

// Runs the layer over T tokens fed in the given chunk sizes (cycled), one fresh sequence.
std::vector<float> run_chunks(const AttentionLayer& layer, const std::vector<float>& x, int64_t T, int64_t hidden,
                              const std::vector<int64_t>& chunks) {
  // An odd block size with blocks handed out shuffled: chunks straddle blocks that are not adjacent in memory.
  testing::MixerHarness harness(layer, /*block_tokens=*/7, DType::f32, /*shuffle_seed=*/42);
  const auto seq = harness.new_sequence();
  std::vector<float> out(size_t(T * hidden));
  size_t ci = 0;
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t n = std::min(chunks[ci++ % chunks.size()], T - t0);
    Batch b;
    std::vector<int32_t> ids(size_t(n), 0);
    b.add(*seq, ids);
    harness.forward(x.data() + t0 * hidden, b, out.data() + t0 * hidden);
    t0 += n;
  }
  return out;
}

void check(const Case& c) {
  const Weights w(c);
  const Rope rope(RopeConfig{c.head_dim});
  const AttentionLayer layer = make_layer(c, w, rope);
  const int64_t T = 21;
  const HostTensor xs(DType::f32, {T, c.hidden}, 11, 1.f);
  std::vector<float> x(size_t(T * c.hidden));
  for (size_t i = 0; i < x.size(); ++i) x[i] = xs.at(int64_t(i));
  const std::vector<double> want = reference(c, w, rope, x, T);
  for (const auto& chunks : std::vector<std::vector<int64_t>>{{T}, {1}, {9, 3, 1}}) {
    const std::vector<float> got = run_chunks(layer, x, T, c.hidden, chunks);
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
    EXPECT_LT(err, 2e-5) << "first chunk " << chunks[0];
  }
}

TEST(AttentionLayer, Plain) { testing::for_each_target([](Target) { check(Case{}); }); }

TEST(AttentionLayer, SoftcapWindowQkNorm) {
  testing::for_each_target([](Target) {
    Case c;
    c.softcap = 1.5f;  // small enough that tanh bends the scores
    c.window = 5;
    c.qk_norm = true;
    check(c);
  });
}

TEST(AttentionLayer, Sinks) {
  testing::for_each_target([](Target) {
    Case c;
    c.sinks = true;
    check(c);
  });
}

TEST(AttentionLayer, OutputGate) {
  testing::for_each_target([](Target) {
    Case c;
    c.gate = true;
    c.qk_norm = true;
    check(c);
    c.sinks = true;
    c.softcap = 3.f;
    c.window = 6;
    check(c);
  });
}

TEST(AttentionLayer, QueryTemperature) {
  testing::for_each_target([](Target) {
    Case c;
    c.temperature_beta = 0.7f;  // large, so a missed step shows
    c.temperature_interval = 4;  // 21 tokens cross five steps; chunks of 9, 3, 1 start mid-step
    check(c);
    c.window = 6;
    c.qk_norm = true;
    check(c);
  });
}

// Several sequences in one batch: all prefilling (one packed varlen paged prefill call), then one sequence
// decoding beside two that prefill (the prefilling rows are packed for the call, the decode row goes alone).
TEST(AttentionLayer, RaggedBatchOfPrefills) {
  Case c;
  c.window = 9;
  c.sinks = true;
  const Weights w(c);
  const Rope rope(RopeConfig{c.head_dim});
  const AttentionLayer layer = make_layer(c, w, rope);
  testing::MixerHarness harness(layer, /*block_tokens=*/5, DType::f32, /*shuffle_seed=*/3);
  const int64_t H = c.hidden;
  // Each sequence s has its own inputs xs[s] of 30 tokens; lengths fed: first batch, then the mixed one.
  std::vector<std::vector<float>> xs;
  for (uint64_t s = 0; s < 5; ++s) {
    const HostTensor t(DType::f32, {30, H}, 20 + s, 1.f);
    xs.emplace_back(size_t(30 * H));
    for (size_t i = 0; i < xs.back().size(); ++i) xs.back()[i] = t.at(int64_t(i));
  }
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int s = 0; s < 5; ++s) seqs.push_back(harness.new_sequence());
  auto run = [&](const std::vector<std::pair<int, int64_t>>& parts) {  // (sequence, tokens) in batch order
    Batch b;
    std::vector<float> x;
    for (auto [s, n] : parts) {
      const int64_t from = seqs[size_t(s)]->length();
      x.insert(x.end(), xs[size_t(s)].begin() + from * H, xs[size_t(s)].begin() + (from + n) * H);
      std::vector<int32_t> ids(size_t(n), 0);
      b.add(*seqs[size_t(s)], ids);
    }
    std::vector<float> y(x.size());
    harness.forward(x.data(), b, y.data());
    // Row r of sequence s's part is its token at position (length after - n + r): compare with the reference.
    int64_t row = 0;
    for (auto [s, n] : parts) {
      const int64_t len = seqs[size_t(s)]->length();
      const std::vector<double> want = reference(c, w, rope, xs[size_t(s)], len);
      double err = 0;
      for (int64_t i = 0; i < n * H; ++i)
        err = std::max(err, std::fabs(double(y[size_t(row * H + i)]) - want[size_t((len - n) * H + i)]));
      EXPECT_LT(err, 2e-5) << "sequence " << s << ", " << n << " tokens";
      row += n;
    }
  };
  run({{0, 21}, {1, 12}, {2, 17}});
  run({{3, 14}, {0, 1}, {4, 25}, {1, 2}});
}

TEST(AttentionLayer, RejectsBadShapes) {
  Case c;
  c.gate = true;
  const Weights w(c);  // q_proj has 2 * heads * head_dim rows
  const Rope rope(RopeConfig{c.head_dim});
  Case plain = c;
  plain.gate = false;
  EXPECT_THROW(make_layer(plain, w, rope), ArgumentError);  // gate-sized q_proj without the gate
  const AttentionLayer layer = make_layer(c, w, rope);
  AttentionLayer copy = layer;
  const HostTensor bad(DType::f32, {c.heads + 1}, 1);
  EXPECT_THROW(copy.set_sinks(bad.view, "attn.sinks"), ArgumentError);
  Case neg = c;
  neg.softcap = -1.f;
  EXPECT_THROW(make_layer(neg, w, rope), ArgumentError);
  Case hot = c;
  hot.temperature_beta = 0.1f;  // without an interval to count steps in
  EXPECT_THROW(make_layer(hot, w, rope), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
