#pragma once
// The Mamba-2 mixer (Mamba2ForCausalLM, and the SSM half of Falcon-H1's parallel blocks):
//   [z | xBC | dt] = in_proj(x) * proj_multipliers      (per output column: Falcon-H1's muP vector)
//   xBC = silu(causal depthwise conv over time of xBC)                  (width W, conv tail kept per sequence)
//   x | B | C = xBC;  dt' = softplus(dt + dt_bias) (clamped to the time-step limit);  A = -exp(A_log)
//   y = SSD scan (h_t = exp(A dt') h_{t-1} + dt' x_t B_t^T, y_t = h_t C_t + D x_t)  (state [H, P, N] per sequence)
//   y = gated RMSNorm(y, z) or y * silu(z);  out = out_proj(y)
// The gated norm normalises each of `norm_groups` equal slices of the inner dimension separately; Mamba-2 gates
// first (norm(y * silu(z)) * w), Falcon-H1 may norm first (norm(y) * w * silu(z)).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

struct Mamba2MixerConfig {
  int64_t hidden = 0, num_heads = 0, head_dim = 0, n_groups = 1, state_size = 0, conv_kernel = 4;
  // Clamp of dt' (transformers' time_step_limit; (0, inf) clamps nothing).
  float dt_min = 0.f, dt_max = INFINITY;
  bool gated_norm = true;         // false: y * silu(z) with no norm (Falcon-H1 mamba_rms_norm = false)
  bool norm_before_gate = false;  // Mamba-2: gate, then norm
  int64_t norm_groups = 1;
  float norm_eps = 1e-5f;
  std::vector<float> proj_multipliers;  // [proj_dim()] per in_proj output column, or empty

  int64_t inner() const { return num_heads * head_dim; }
  int64_t conv_dim() const { return inner() + 2 * n_groups * state_size; }
  int64_t proj_dim() const { return inner() + conv_dim() + num_heads; }
  int64_t conv_state_len() const { return conv_kernel > 1 ? conv_kernel - 1 : 1; }
};

struct Mamba2MixerWeights {
  Linear in_proj, out_proj;
  TensorView conv_weight;  // [conv_dim, 1, W] as Hugging Face stores it (or [conv_dim, W])
  TensorView conv_bias;    // [conv_dim] or empty
  TensorView dt_bias, A_log, D;  // [H] each
  TensorView norm_weight;        // [inner], required when gated_norm
};

class Mamba2Mixer : public SequenceMixer {
 public:
  // Validates every weight against the config; errors name `name`.<tensor>.
  Mamba2Mixer(const Mamba2MixerConfig& config, Mamba2MixerWeights weights, const std::string& name);

  const Mamba2MixerConfig& config() const { return config_; }
  // Pool slot: conv tail [conv_dim, W - 1] and SSM state [H, P, N].
  static CacheSpec spec(const Mamba2MixerConfig& c);
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  static constexpr const char* kKind = "mamba2";
  std::string kind() const override { return kKind; }

  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // Explainer: the Frobenius norm of each head's [P, N] state of the first sequence.
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

  // The parts as the forward pass reads them (the GPU runner's device_mamba2 uploads these): conv weight [conv_dim,
  // W] and bias [conv_dim] or empty in the checkpoint's dtype; A = -exp(A_log), D and dt_bias [H] and the gated
  // norm's weight [inner] (empty without one) in f32.
  const Linear& in_proj() const { return w_.in_proj; }
  const Linear& out_proj() const { return w_.out_proj; }
  const TensorView& conv_weight() const { return conv_weight_; }
  const TensorView& conv_bias() const { return w_.conv_bias; }
  const std::vector<float>& A() const { return A_; }
  const std::vector<float>& D() const { return D_; }
  const std::vector<float>& dt_bias() const { return dt_bias_; }
  const std::vector<float>& norm_weight() const { return norm_w_; }

 private:
  void gate_and_norm(const float* proj, int64_t T, float* y) const;

  Mamba2MixerConfig config_;
  Mamba2MixerWeights w_;
  TensorView conv_weight_;                 // [conv_dim, W]
  std::vector<float> A_, D_, dt_bias_, norm_w_;
};

// Gated RMSNorm over rows of `inner` values split into `groups` slices: y = norm(y * silu(z)) * w when the gate
// comes first, else norm(y) * w * silu(z). z rows have stride z_stride; y is updated in place.
void gated_rms_norm(float* y, const float* z, int64_t rows, int64_t inner, int64_t z_stride, int64_t groups,
                    const float* w, float eps, bool norm_before_gate);
void gated_rms_norm_reference(float* y, const float* z, int64_t rows, int64_t inner, int64_t z_stride,
                              int64_t groups, const float* w, float eps, bool norm_before_gate);

}  // namespace attnzoo
