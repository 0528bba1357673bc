#pragma once
// The Gated DeltaNet mixer (Qwen3-Next / Qwen3.5 "linear_attention" layers):
//   [q | k | v | z | b | a] = in_proj(x)                      (outputs regrouped per token, see ProjectionRun)
//   q | k | v = silu(causal depthwise conv over time of [q | k | v])   (width W, conv tail kept per sequence)
//   g = -exp(A_log) * softplus(a + dt_bias);  beta = sigmoid(b)       (per value head and token)
//   o = gated delta rule(l2norm(q), l2norm(k), v, g, beta)            (state [HV, K, V] f32 per sequence)
//   out = out_proj(rmsnorm(o) * w * silu(z))                          (per value head, weight w as stored)
// Value heads outnumber key heads (GVA): value head hv reads key head hv / (HV / H).
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

struct GatedDeltaNetConfig {
  int64_t hidden = 0, num_k_heads = 0, num_v_heads = 0, head_k_dim = 0, head_v_dim = 0, conv_kernel = 4;
  float norm_eps = 1e-6f;

  int64_t key_dim() const { return num_k_heads * head_k_dim; }
  int64_t value_dim() const { return num_v_heads * head_v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // in_proj output features: q, k, v, z, b, a.
  int64_t proj_dim() const { return conv_dim() + value_dim() + 2 * num_v_heads; }
  int64_t conv_state_len() const { return conv_kernel > 1 ? conv_kernel - 1 : 1; }
};

// A run of consecutive output features of one source projection. The mixer's input projection is one or more
// checkpoint Linears (borrowed as stored); their outputs are regrouped per token, run after run, into the
// mixer's [q | k | v | z | b | a] order. Regrouping activations (a copy of T * proj_dim floats) keeps the
// weights zero-copy, where regrouping weight rows would duplicate the largest projection of the layer.
struct ProjectionRun {
  int source = 0;
  int64_t begin = 0, count = 0;
};

struct GatedDeltaNetWeights {
  std::vector<Linear> in_proj;           // the checkpoint's input projections, each [out_i, hidden]
  std::vector<ProjectionRun> in_proj_runs;  // concatenated: proj_dim features in q, k, v, z, b, a order
  Linear out_proj;                       // [hidden, HV*V]
  TensorView conv_weight;  // [conv_dim, 1, W] as Hugging Face stores it (or [conv_dim, W])
  TensorView conv_bias;    // [conv_dim] or empty
  TensorView A_log, dt_bias;  // [HV]
  TensorView norm_weight;     // [V], shared by every value head; applied as w (not 1 + w)
};

// Qwen3-Next stores in_proj_qkvz (source 0) per key head as [q (K) | k (K) | v (r*V) | z (r*V)] and in_proj_ba
// (source 1) per key head as [b (r) | a (r)], r = HV / H (transformers' fix_query_key_value_ordering).
std::vector<ProjectionRun> qwen3_next_in_proj_runs(const GatedDeltaNetConfig& c);
// A Qwen3-Next GGUF (attn_qkv and attn_gate, each in its own type: llama-quantize's mixtures raise only attn_qkv):
// in_proj_qkv ([all q; all k; all v], source 0) and in_proj_z (source 1) in order, in_proj_ba (source 2) grouped
// per key head as above.
std::vector<ProjectionRun> qwen3_next_split_in_proj_runs(const GatedDeltaNetConfig& c);
// Qwen3.5 stores in_proj_qkv, in_proj_z, in_proj_b, in_proj_a (sources 0..3) already in order.
std::vector<ProjectionRun> qwen3_5_in_proj_runs(const GatedDeltaNetConfig& c);

class GatedDeltaNetMixer : public SequenceMixer {
 public:
  // Validates every weight against the config; errors name `name`.<tensor>.
  GatedDeltaNetMixer(const GatedDeltaNetConfig& config, GatedDeltaNetWeights weights, const std::string& name);

  const GatedDeltaNetConfig& config() const { return config_; }
  // Pool slot: conv tail [conv_dim, W - 1] and the delta-rule state [HV, K, V].
  static CacheSpec spec(const GatedDeltaNetConfig& c);
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  static constexpr const char* kKind = "linear_attention";
  std::string kind() const override { return kKind; }

  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // Frobenius norm of each value head's state (after forward() has run on this batch).
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

  // Where each projection run lands: part 0 = conv input (q k v), 1 = z, 2 = b, 3 = a; offset within the part.
  struct RunTarget {
    int64_t begin, count;  // columns of the sources' outputs side by side
    int part;
    int64_t offset;
  };
  // The parts as the forward pass reads them (the GPU runner's device_gated_deltanet uploads these): the in_proj
  // sources, their summed width and the runs' targets; conv weight [conv_dim, W] and bias [conv_dim] or empty as
  // stored; -exp(A_log) and dt_bias [HV] and the norm's weight [V] in f32.
  const std::vector<Linear>& in_proj() const { return w_.in_proj; }
  int64_t in_proj_width() const { return in_proj_width_; }
  const std::vector<RunTarget>& run_targets() const { return run_targets_; }
  const Linear& out_proj() const { return w_.out_proj; }
  const TensorView& conv_weight() const { return conv_weight_; }
  const TensorView& conv_bias() const { return w_.conv_bias; }
  const std::vector<float>& neg_A() const { return neg_A_; }
  const std::vector<float>& dt_bias() const { return dt_bias_; }
  const std::vector<float>& norm_weight() const { return norm_w_; }

 private:
  GatedDeltaNetConfig config_;
  GatedDeltaNetWeights w_;
  TensorView conv_weight_;  // [conv_dim, W]
  int64_t in_proj_width_ = 0;  // summed out_features of the in_proj sources
  std::vector<RunTarget> run_targets_;
  std::vector<float> neg_A_, dt_bias_, norm_w_;
};

}  // namespace attnzoo
