// Every mixer whose input feeds several projections (Kimi Delta Attention, Gated DeltaNet's in_proj pieces, MLA's
// q / kv_a, a MoE's router beside its shared expert, Falcon-H1's parallel branches) runs them through
// Linear::forward_shared (the branches: QuantInputScope): one quantization
// (or bf16 rounding) of x for all. Each mixer's output is bit for bit the one of the projections run one by one
// (Linear::set_sharing(false)), on block weights (Q4_0 / Q4_K / Q8_0, rows regrouped and GGUF rows), f32 and bf16
// weights, decode and prompt sizes, and under "auto" x is quantized once where it was quantized per projection.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/threads.h"
#include "layers/attention_layer.h"
#include "layers/deepseek_moe.h"
#include "layers/gated_deltanet_mixer.h"
#include "layers/kda_mixer.h"
#include "layers/linear.h"
#include "layers/mamba2_mixer.h"
#include "layers/matmul_precision.h"
#include "layers/mla_mixer.h"
#include "layers/moe.h"
#include "layers/parallel_mixer.h"
#include "layers/rope.h"
#include "kernels/quant/quant.h"
#include "testing/mixer_harness.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

// Linears of one format over weights this store keeps alive (Linear borrows them).
struct Weights {
  QuantType type;
  uint64_t seed = 100;
  std::deque<HostTensor> dense;
  std::deque<std::vector<uint8_t>> blocks;

  explicit Weights(QuantType t) : type(t) {}
  Linear make(int64_t rows, int64_t cols, const std::string& name, QuantType t) {
    ++seed;
    if (t == QuantType::F32 || t == QuantType::BF16) {
      const HostTensor& w = dense.emplace_back(DType::f32, std::vector<int64_t>{rows, cols}, seed, 0.1f);
      return Linear::from_weights(w.view, {}, name, t == QuantType::BF16 ? DType::bf16 : DType::f32);
    }
    const std::vector<uint8_t>& raw = blocks.emplace_back(testing::random_quant_rows(t, rows, cols, seed));
    return Linear::from_quantized(raw.data(), raw.size(), t, rows, cols, {}, name);
  }
  Linear make(int64_t rows, int64_t cols, const std::string& name) { return make(rows, cols, name, type); }
  TensorView tensor(std::vector<int64_t> shape, float stddev, float add = 0.f) {
    HostTensor& t = dense.emplace_back(DType::f32, std::move(shape), ++seed, stddev);
    for (int64_t i = 0; i < t.numel(); ++i) t.view.ptr<float>()[i] += add;
    return t.view;
  }
};

constexpr int64_t kHidden = 256;  // one Q4_K block per row

struct Counts {
  uint64_t quantized = 0, bf16_prepared = 0;
};

// Runs `run` with sharing off then on (x quantized once per projection, then once per input), at every T and
// precision; the outputs must match to the bit, and sharing must save `x_projections - 1` quantizations (block
// weights, "auto") or bf16 roundings (where the unshared run rounded x for every projection).
// `experts_of` (MoE): the routed experts a call runs, each of whose gate / up share their input too.
void expect_sharing_exact(const std::string& what, QuantType type, int x_projections,
                          const std::function<std::vector<float>(const float*, int64_t)>& run,
                          const std::function<int64_t(const float*, int64_t)>& experts_of = {}) {
  struct PromptInt8On {
    PromptInt8Rows saved = linear_prompt_int8_rows();
    PromptInt8On() { set_linear_prompt_int8_rows(PromptInt8Rows::on); }
    ~PromptInt8On() { set_linear_prompt_int8_rows(saved); Linear::set_sharing(true); }
  } on;
  for (MatmulPrecision p : {MatmulPrecision::automatic, MatmulPrecision::highest})
    for (int64_t T : {1, 3, 8, 9, 64}) {
      ScopedMatmulPrecision scope(p);
      const std::string at = what + " " + quant_type_name(type) + " T=" + std::to_string(T) +
                             (p == MatmulPrecision::highest ? " highest" : " auto");
      // Random Q4_K blocks take sub-block scales up to 63: weights ~20x the others', so x ~20x smaller keeps the
      // recurrences finite.
      HostTensor x(DType::f32, {T, kHidden}, 7 + uint64_t(T), type == QuantType::Q4_K ? 0.02f : 0.5f);
      const int64_t experts = experts_of ? experts_of(x.view.ptr<float>(), T) : 0;
      Counts c[2];
      std::vector<float> y[2];
      for (int shared = 0; shared < 2; ++shared) {
        Linear::set_sharing(shared == 1);
        const uint64_t q0 = quant_gemv_quantizations(), b0 = linear_bf16_gemm_counts().prepared;
        y[shared] = run(x.view.ptr<float>(), T);
        c[shared] = {quant_gemv_quantizations() - q0, linear_bf16_gemm_counts().prepared - b0};
      }
      ASSERT_FALSE(y[0].empty()) << at;
      int finite = 0;
      for (float v : y[0]) finite += std::isfinite(v) ? 1 : 0;
      EXPECT_EQ(finite, int(y[0].size())) << at;
      ASSERT_EQ(y[0].size(), y[1].size()) << at;
      EXPECT_EQ(std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)), 0) << at << ": bits differ";
      if (quant_is_blocked(type) && p == MatmulPrecision::automatic)
        EXPECT_EQ(c[0].quantized - c[1].quantized, uint64_t(x_projections - 1 + experts)) << at;
      else
        EXPECT_EQ(c[0].quantized, c[1].quantized) << at;
      if (!experts_of && c[0].bf16_prepared > c[1].bf16_prepared)
        EXPECT_EQ(c[0].bf16_prepared - c[1].bf16_prepared, uint64_t(x_projections - 1)) << at;
    }
}

const QuantType kTypes[] = {QuantType::Q4_0, QuantType::Q4_K, QuantType::Q8_0, QuantType::F32, QuantType::BF16};

TEST(MixerInputSharing, KimiDeltaAttention) {
  for (QuantType t : kTypes) {
    Weights w(t);
    const KdaConfig c{.hidden = kHidden, .num_heads = 2, .head_dim = 16, .conv_kernel = 4};
    const int64_t D = c.qkv_dim(), K = c.head_dim;
    KdaWeights kw;
    kw.q_proj = w.make(D, kHidden, "q_proj");
    kw.k_proj = w.make(D, kHidden, "k_proj");
    kw.v_proj = w.make(D, kHidden, "v_proj");
    kw.q_conv = w.tensor({D, 1, c.conv_kernel}, 0.5f);
    kw.k_conv = w.tensor({D, 1, c.conv_kernel}, 0.5f);
    kw.v_conv = w.tensor({D, 1, c.conv_kernel}, 0.5f);
    kw.f_a_proj = w.make(K, kHidden, "f_a_proj");
    kw.f_b_proj = w.make(D, K, "f_b_proj", QuantType::F32);
    kw.A_log = w.tensor({1, 1, c.num_heads, 1}, 0.5f);
    kw.dt_bias = w.tensor({D}, 0.5f);
    kw.b_proj = w.make(c.num_heads, kHidden, "b_proj");  // 2 rows: GGUF rows beside regrouped ones
    kw.g_a_proj = w.make(K, kHidden, "g_a_proj");
    kw.g_b_proj = w.make(D, K, "g_b_proj", QuantType::F32);
    kw.o_norm_weight = w.tensor({K}, 0.3f, 1.f);
    kw.o_proj = w.make(kHidden, D, "o_proj", QuantType::F32);
    const KdaMixer m(c, std::move(kw), "kda");
    expect_sharing_exact("kda", t, 6, [&](const float* x, int64_t T) {
      return testing::run_mixer_pieces(m, x, kHidden, {T});
    });
  }
}

TEST(MixerInputSharing, GatedDeltaNetInProjPieces) {
  for (QuantType t : kTypes) {
    Weights w(t);
    const GatedDeltaNetConfig c{.hidden = kHidden, .num_k_heads = 2, .num_v_heads = 4, .head_k_dim = 16,
                                .head_v_dim = 8, .conv_kernel = 4};
    GatedDeltaNetWeights gw;
    // Qwen3.5's four sources, written side by side into one buffer with its row stride.
    gw.in_proj.push_back(w.make(2 * c.key_dim() + c.value_dim(), kHidden, "in_proj_qkv"));
    gw.in_proj.push_back(w.make(c.value_dim(), kHidden, "in_proj_z"));
    gw.in_proj.push_back(w.make(c.num_v_heads, kHidden, "in_proj_b"));
    gw.in_proj.push_back(w.make(c.num_v_heads, kHidden, "in_proj_a"));
    gw.in_proj_runs = qwen3_5_in_proj_runs(c);
    gw.out_proj = w.make(kHidden, c.value_dim(), "out_proj", QuantType::F32);
    gw.conv_weight = w.tensor({c.conv_dim(), 1, c.conv_kernel}, 0.5f);
    gw.A_log = w.tensor({c.num_v_heads}, 0.5f);
    gw.dt_bias = w.tensor({c.num_v_heads}, 0.5f);
    gw.norm_weight = w.tensor({c.head_v_dim}, 0.3f, 1.f);
    const GatedDeltaNetMixer m(c, std::move(gw), "gdn");
    expect_sharing_exact("gated_deltanet", t, 4, [&](const float* x, int64_t T) {
      return testing::run_mixer_pieces(m, x, kHidden, {T});
    });
  }
}

TEST(MixerInputSharing, MlaQAndKvA) {
  for (QuantType t : kTypes)
    for (bool lora : {true, false}) {
      Weights w(t);
      const MlaConfig c{.hidden = kHidden, .num_heads = 2, .q_lora_rank = lora ? 32 : 0, .kv_lora_rank = 16,
                        .qk_nope_head_dim = 8, .qk_rope_head_dim = 4, .v_head_dim = 8, .norm_eps = 1e-6f,
                        .scale = 0.3f};
      const int64_t Hq = c.num_heads * c.qk_head_dim();
      MlaLayerWeights mw;
      if (lora) {
        mw.q_a_proj.emplace(w.make(c.q_lora_rank, kHidden, "q_a"));
        mw.q_a_norm.emplace(w.tensor({c.q_lora_rank}, 0.3f, 1.f), c.norm_eps, false, "q_a_norm");
        mw.q_b_proj.emplace(w.make(Hq, c.q_lora_rank, "q_b", QuantType::F32));
      } else {
        mw.q_proj.emplace(w.make(Hq, kHidden, "q"));
      }
      mw.kv_a_proj = w.make(c.latent_dim(), kHidden, "kv_a");
      mw.kv_a_norm = RmsNorm(w.tensor({c.kv_lora_rank}, 0.3f, 1.f), c.norm_eps, false, "kv_a_norm");
      mw.kv_b_proj = w.make(c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, "kv_b", QuantType::F32);
      mw.o_proj = w.make(kHidden, c.num_heads * c.v_head_dim, "o", QuantType::F32);
      const RopeConfig rc{.head_dim = c.qk_rope_head_dim, .theta = 100.0, .layout = RopeLayout::interleaved};
      const MlaMixer m(c, std::move(mw), Rope(rc), "mla");
      expect_sharing_exact(lora ? "mla q_a" : "mla q", t, 2, [&](const float* x, int64_t T) {
        return testing::run_mixer_pieces(m, x, kHidden, {T});
      });
    }
}

GatedMlp expert(Weights& w, int64_t width, const std::string& name) {
  return GatedMlp(w.make(width, kHidden, name + ".gate"), w.make(width, kHidden, name + ".up"),
                  w.make(kHidden, width, name + ".down", QuantType::F32), Activation::silu, name);
}

// The router and the shared gate ride in the shared expert's gate / up call. A router of the experts' format
// saves its quantization; an f32 one (llama.cpp keeps ffn_gate_inp unquantized) runs alone, and gate / up still
// share theirs.
TEST(MixerInputSharing, MoeRouterBesideTheSharedExpert) {
  for (QuantType t : kTypes)
    for (bool f32_router : {false, true}) {
      Weights w(t);
      const int64_t E = 4;
      std::vector<GatedMlp> experts;
      for (int64_t e = 0; e < E; ++e) experts.push_back(expert(w, 32, "e" + std::to_string(e)));
      const QuantType rt = f32_router ? QuantType::F32 : t;
      const SparseMoe moe({.top_k = 2, .normalize_top_k = true}, w.make(E, kHidden, "router", rt), experts,
                          expert(w, 48, "shared"), w.make(1, kHidden, "shared_gate", rt), "moe");
      std::vector<float> ds_bias(size_t(E), 0.01f);
      const DeepseekMoe ds({.top_k = 2, .n_group = 2, .topk_group = 1}, w.make(E, kHidden, "ds_router", rt),
                           TensorView::contiguous(ds_bias.data(), DType::f32, {E}), experts, expert(w, 48, "ds_shared"),
                           "ds");
      const auto active = [](const auto& m) {
        return [&m](const float* x, int64_t T) {
          MoeRouting r;
          m.route(x, T, r);
          std::vector<bool> used(size_t(m.num_experts()), false);
          for (int32_t e : r.experts) used[size_t(e)] = true;
          return int64_t(std::count(used.begin(), used.end(), true));
        };
      };
      const auto run = [](const FeedForward& f) {
        return [&f](const float* x, int64_t T) {
          std::vector<float> out(size_t(T * kHidden));
          f.forward(x, T, out.data());
          return out;
        };
      };
      // Router and shared gate beside gate / up: 4 inputs quantized as 1 (2 as 1 with the f32 ones, as before).
      expect_sharing_exact(f32_router ? "moe f32 router" : "moe", t, f32_router ? 2 : 4, run(moe), active(moe));
      expect_sharing_exact(f32_router ? "deepseek f32 router" : "deepseek", t, f32_router ? 2 : 3, run(ds), active(ds));
    }
}

// A Falcon-H1 layer: attention and Mamba-2 side by side over the same normed input (ParallelMixer). `attn_in` and
// `ssm_in` scale each branch's input; o_proj / out_proj are `tail` weights.
std::unique_ptr<ParallelMixer> falcon_h1_layer(Weights& w, int64_t hidden, int64_t heads, int64_t kv_heads,
                                               int64_t head_dim, const Mamba2MixerConfig& mc, float attn_in,
                                               float ssm_in, QuantType tail) {
  const AttentionConfig ac{.hidden = hidden, .num_heads = heads, .num_kv_heads = kv_heads, .head_dim = head_dim};
  auto attn = std::make_unique<AttentionLayer>(
      ac, w.make(heads * head_dim, hidden, "q_proj"), w.make(kv_heads * head_dim, hidden, "k_proj"),
      w.make(kv_heads * head_dim, hidden, "v_proj"), w.make(hidden, heads * head_dim, "o_proj", tail), std::nullopt,
      std::nullopt, Rope(RopeConfig{.head_dim = head_dim}), "attn");
  Mamba2MixerWeights mw;
  mw.in_proj = w.make(mc.proj_dim(), hidden, "in_proj");
  mw.out_proj = w.make(hidden, mc.inner(), "out_proj", tail);
  mw.conv_weight = w.tensor({mc.conv_dim(), 1, mc.conv_kernel}, 0.5f);
  mw.conv_bias = w.tensor({mc.conv_dim()}, 0.2f);
  mw.dt_bias = w.tensor({mc.num_heads}, 0.3f);
  mw.A_log = w.tensor({mc.num_heads}, 0.3f);
  mw.D = w.tensor({mc.num_heads}, 0.5f);
  std::vector<ParallelBranch> branches;
  branches.push_back({std::move(attn), attn_in, 0.7f});
  branches.push_back({std::make_unique<Mamba2Mixer>(mc, std::move(mw), "mamba"), ssm_in, 0.4f});
  return std::make_unique<ParallelMixer>(hidden, std::move(branches));
}

// Falcon-H1's two branches quantize their input once between them (4 projections: q / k / v and in_proj) where
// both scale it alike; with two scales (Falcon-H1-0.5B: 1 and 1.25) their rows differ, and only q / k / v share
// (3 as 1). The bf16 roundings of dense bf16 weights are shared within a branch only, so dense weights are f32 here.
TEST(MixerInputSharing, FalconH1ParallelBranches) {
  Mamba2MixerConfig mc;
  mc.hidden = kHidden, mc.num_heads = 4, mc.head_dim = 16, mc.n_groups = 1, mc.state_size = 16, mc.conv_kernel = 4;
  mc.gated_norm = false;  // Falcon-H1's mamba_rms_norm = false
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_K, QuantType::Q8_0, QuantType::F32})
    for (const auto& [attn_in, ssm_in] : {std::pair{1.f, 1.f}, std::pair{1.25f, 1.25f}, std::pair{1.f, 1.25f}}) {
      Weights w(t);
      const auto layer = falcon_h1_layer(w, kHidden, 2, 1, 32, mc, attn_in, ssm_in, QuantType::F32);
      const std::string what = "falcon_h1 in " + std::to_string(attn_in) + " / " + std::to_string(ssm_in);
      expect_sharing_exact(what, t, attn_in == ssm_in ? 4 : 3, [&](const float* x, int64_t T) {
        return testing::run_mixer_pieces(*layer, x, kHidden, {T});
      });
    }
}

// Seven rounds of `pieces` through `mixer` with input sharing off then on: per call, the time of each, the 8-bit
// quantizations each made and the time ratio (the disabled benches below).
void time_sharing_off_on(const SequenceMixer& mixer, const float* x, int64_t hidden, const std::vector<int64_t>& pieces,
                         const char* label) {
  const double calls = double(pieces.size());
  for (int round = 0; round < 7; ++round) {
    double s[2];
    uint64_t q[2];
    for (int shared = 0; shared < 2; ++shared) {
      Linear::set_sharing(shared == 1);
      const uint64_t q0 = quant_gemv_quantizations();
      const auto t0 = std::chrono::steady_clock::now();
      testing::run_mixer_pieces(mixer, x, hidden, pieces);
      s[shared] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      q[shared] = (quant_gemv_quantizations() - q0) / uint64_t(calls);
    }
    Linear::set_sharing(true);
    std::printf("%s round %d: unshared %.3f ms/call (%llu quantizations), shared %.3f ms/call (%llu), ratio %.3f\n",
                label, round, 1e3 * s[0] / calls, (unsigned long long)q[0], 1e3 * s[1] / calls,
                (unsigned long long)q[1], s[1] / s[0]);
  }
}

// Decode steps and a prefill of a Falcon-H1-0.5B-shaped layer (hidden 1024; attention 8 heads, 2 KV heads of 64;
// Mamba-2 24 heads of 64, state 128; Q4_K), one input scale for both branches, sharing off / on alternated: the
// time ratio and the quantizations per call. Timings, so disabled; run with --gtest_also_run_disabled_tests
// --gtest_filter=MixerInputSharing.DISABLED_BenchFalconH1Layer.
TEST(MixerInputSharing, DISABLED_BenchFalconH1Layer) {
  Weights w(QuantType::Q4_K);
  const int64_t hidden = 1024;
  Mamba2MixerConfig mc;
  mc.hidden = hidden, mc.num_heads = 24, mc.head_dim = 64, mc.n_groups = 1, mc.state_size = 128, mc.conv_kernel = 4;
  mc.gated_norm = false;
  const auto layer = falcon_h1_layer(w, hidden, 8, 2, 64, mc, 1.f, 1.f, QuantType::Q4_K);
  const int64_t steps = 64, prompt = 128;
  HostTensor x(DType::f32, {prompt, hidden}, 5, 0.01f);
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  for (const auto& [name, pieces] : {std::pair{"decode", std::vector<int64_t>(size_t(steps), 1)},
                                     std::pair{"prefill", std::vector<int64_t>{prompt}}}) {
    time_sharing_off_on(*layer, x.view.ptr<float>(), hidden, pieces, name);
  }
}

// What riding the shared expert's dispatch could save an f32 router at decode (task: the router's rows as more
// tasks of the gate / up dispatch): a MoE decode step (hidden 1024, 64 experts of 256, top 4, a shared expert of
// 1024, Q4_K; the router and shared gate f32, as llama.cpp keeps ffn_gate_inp), the router's own call, and an empty
// dispatch of the pool (its wake-up, the most a merged dispatch saves), alternated. Timings, so disabled; run with
// --gtest_also_run_disabled_tests --gtest_filter=MixerInputSharing.DISABLED_BenchF32RouterDispatch.
TEST(MixerInputSharing, DISABLED_BenchF32RouterDispatch) {
  Weights w(QuantType::Q4_K);
  const int64_t hidden = 1024, E = 64;
  std::vector<GatedMlp> experts;
  for (int64_t e = 0; e < E; ++e)
    experts.push_back(GatedMlp(w.make(256, hidden, "e.gate"), w.make(256, hidden, "e.up"),
                               w.make(hidden, 256, "e.down"), Activation::silu, "e"));
  const Linear router = w.make(E, hidden, "router", QuantType::F32);
  const SparseMoe moe({.top_k = 4, .normalize_top_k = true}, router, experts,
                      GatedMlp(w.make(1024, hidden, "s.gate"), w.make(1024, hidden, "s.up"),
                               w.make(hidden, 1024, "s.down"), Activation::silu, "s"),
                      w.make(1, hidden, "shared_gate", QuantType::F32), "moe");
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  HostTensor x(DType::f32, {1, hidden}, 5, 0.01f);
  std::vector<float> out(static_cast<size_t>(hidden)), logits(static_cast<size_t>(E));
  constexpr int kReps = 400;
  const auto time = [&](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) fn();
    return 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kReps;
  };
  for (int round = 0; round < 7; ++round) {
    const double step = time([&] { moe.forward(x.view.ptr<float>(), 1, out.data()); });
    const double own = time([&] { router.forward(x.view.ptr<float>(), 1, logits.data()); });
    const double wake = time([&] { ThreadPool::global().parallel_for(2, [](int64_t, int) {}); });
    std::printf("round %d: MoE step %.1f us, f32 router call %.1f us (%.1f%%), empty dispatch %.1f us (%.1f%%)\n",
                round, step, own, 100 * own / step, wake, 100 * wake / step);
  }
}

// Decode of a Kimi-Linear-sized KDA layer (hidden 2304, 32 heads of 128, Q4_K), 64 steps, sharing off / on
// alternated: the time ratio and the quantizations per step. Timings, so disabled; run with
// --gtest_also_run_disabled_tests --gtest_filter=MixerInputSharing.DISABLED_BenchKdaDecode.
TEST(MixerInputSharing, DISABLED_BenchKdaDecode) {
  Weights w(QuantType::Q4_K);
  const int64_t hidden = 2304;
  const KdaConfig c{.hidden = hidden, .num_heads = 32, .head_dim = 128, .conv_kernel = 4};
  const int64_t D = c.qkv_dim(), K = c.head_dim;
  KdaWeights kw;
  kw.q_proj = w.make(D, hidden, "q_proj");
  kw.k_proj = w.make(D, hidden, "k_proj");
  kw.v_proj = w.make(D, hidden, "v_proj");
  kw.q_conv = w.tensor({D, 1, c.conv_kernel}, 0.5f);
  kw.k_conv = w.tensor({D, 1, c.conv_kernel}, 0.5f);
  kw.v_conv = w.tensor({D, 1, c.conv_kernel}, 0.5f);
  kw.f_a_proj = w.make(K, hidden, "f_a_proj");
  kw.f_b_proj = w.make(D, K, "f_b_proj", QuantType::Q4_0);
  kw.A_log = w.tensor({1, 1, c.num_heads, 1}, 0.5f);
  kw.dt_bias = w.tensor({D}, 0.5f);
  kw.b_proj = w.make(c.num_heads, hidden, "b_proj");
  kw.g_a_proj = w.make(K, hidden, "g_a_proj");
  kw.g_b_proj = w.make(D, K, "g_b_proj", QuantType::Q4_0);
  kw.o_norm_weight = w.tensor({K}, 0.3f, 1.f);
  kw.o_proj = w.make(hidden, D, "o_proj");
  const KdaMixer m(c, std::move(kw), "kda");
  const int64_t steps = 64;
  HostTensor x(DType::f32, {steps, hidden}, 5, 0.01f);
  const std::vector<int64_t> pieces(size_t(steps), 1);
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  time_sharing_off_on(m, x.view.ptr<float>(), hidden, pieces, "decode");
}

}  // namespace
}  // namespace attnzoo
