#pragma once
// The Mamba-1 mixer (MambaForCausalLM, FalconMambaForCausalLM, Jamba's mamba layers): a selective SSM with one
// state of N values per inner channel.
//   [x | z] = in_proj(h)                                       (inner channels each)
//   x = silu(causal depthwise conv over time of x)             (width W, conv tail kept per sequence)
//   [dt_low | B | C] = x_proj(x)                               (dt_rank, N, N)
//   Falcon-Mamba: dt_low, B and C each RMS-normalised (no weight, eps mixer_rms_eps); Jamba: the same with
//   weights (dt_layernorm / b_layernorm / c_layernorm)
//   dt = softplus(dt_proj(dt_low) + dt_bias);  A = -exp(A_log)  [inner, N]
//   selective scan: s_t = exp(dt A) s_{t-1} + dt B_t x_t,  y_t = s_t C_t + D x_t,  y_t *= silu(z_t)
//   out = out_proj(y)
// Prompt pieces go through selective_scan (channel-major, so the token-major activations are transposed per
// sequence); single decode tokens through selective_state_update, token-major as they are.
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

struct MambaMixerConfig {
  int64_t hidden = 0, inner = 0, state_size = 0, dt_rank = 0, conv_kernel = 4;
  bool bcdt_rms_norm = false;  // Falcon-Mamba's (weightless) and Jamba's RMSNorm of dt_low, B and C
  float mixer_rms_eps = 1e-6f;

  int64_t x_proj_dim() const { return dt_rank + 2 * state_size; }
  int64_t conv_state_len() const { return conv_kernel > 1 ? conv_kernel - 1 : 1; }
};

struct MambaMixerWeights {
  Linear in_proj;          // [2 inner, hidden] (bias optional)
  Linear x_proj;           // [dt_rank + 2 N, inner]
  Linear dt_proj;          // [inner, dt_rank], no bias (dt_bias is added inside the scan, before softplus)
  Linear out_proj;         // [hidden, inner] (bias optional)
  TensorView conv_weight;  // [inner, 1, W] as Hugging Face stores it (or [inner, W])
  TensorView conv_bias;    // [inner] or empty
  TensorView dt_bias;      // [inner] (dt_proj.bias)
  TensorView A_log;        // [inner, N]
  TensorView D;            // [inner]
  // With bcdt_rms_norm: the norms' weights [dt_rank], [N], [N] (Jamba); empty: weightless (Falcon-Mamba).
  TensorView dt_norm, b_norm, c_norm;
};

class MambaMixer : public SequenceMixer {
 public:
  // Validates every weight against the config; errors name `name`.<tensor>.
  MambaMixer(const MambaMixerConfig& config, MambaMixerWeights weights, const std::string& name);

  const MambaMixerConfig& config() const { return config_; }
  // What the GPU runner's block (models/cuda/device_mamba.*) uploads: the checkpoint's projections and conv bias,
  // the conv weight as [inner, W], A = -exp(A_log), D, dt_bias and the dt / B / C norms' weights (ones where
  // weightless) widened to f32.
  const MambaMixerWeights& weights() const { return w_; }
  const TensorView& conv_weight() const { return conv_weight_; }
  const std::vector<float>& A() const { return A_; }
  const std::vector<float>& D() const { return D_; }
  const std::vector<float>& dt_bias() const { return dt_bias_; }
  const std::vector<float>& dt_norm() const { return dt_norm_; }
  const std::vector<float>& b_norm() const { return b_norm_; }
  const std::vector<float>& c_norm() const { return c_norm_; }
  static CacheSpec spec(const MambaMixerConfig& c);
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  static constexpr const char* kKind = "mamba";
  std::string kind() const override { return kKind; }

  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // Explainer: the norm of each inner channel's [N] state of the first sequence.
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

 private:
  MambaMixerConfig config_;
  MambaMixerWeights w_;
  TensorView conv_weight_;  // [inner, W]
  std::vector<float> A_, D_, dt_bias_;
  std::vector<float> dt_norm_, b_norm_, c_norm_;  // ones where weightless
};

// Transposes n token rows (row t at src + t * src_stride, `cols` values) into channel-major [cols, n], and back.
// Blocked so that both sides are touched a cache line at a time.
void rows_to_channels(const float* src, int64_t src_stride, int64_t n, int64_t cols, float* dst);
void channels_to_rows(const float* src, int64_t n, int64_t cols, float* dst, int64_t dst_stride);

}  // namespace attnzoo
