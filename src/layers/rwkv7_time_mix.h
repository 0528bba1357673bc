#pragma once
// RWKV-7 time mix (fla's RWKV7Attention, fla 0.6.0), per token of each sequence:
//   delta = x_prev - x;  x_c = x + delta * x_c  for c in r, w, k, v, a, g          (fused_addcmul_rwkv7)
//   r = r_proj(x_r);  k = k_proj(x_k);  v = v_proj(x_v)
//   w = -exp(-1/2) * sigmoid(w_lora(x_w))          (log decay; w_lora = up(tanh(down x)) + bias)
//   v = lerp(v, v_first, sigmoid(v_lora(x_v)))     (layers > 0; layer 0 sets v_first = v)
//   a = sigmoid(a_lora(x_a));  g = g_lora(x_g)     (g_lora = up(sigmoid(down x)), no bias)
//   kk = l2norm_per_head(k * k_k);  k = k * (1 + (a - 1) * k_a)
//   o = RWKV-7 recurrence(r, w, k, v, a = -kk, b = kk * a, scale 1)   (state [H, K, V] per sequence)
//   o = group_norm_per_head(o, eps = head_dim * norm_eps)
//   out = o_proj((o + sum_K(r * k * r_k) * v) * g)                    (gate_output_correction)
#include <optional>
#include <string>
#include <vector>

#include "layers/batch.h"
#include "state/layer_memory.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"

namespace attnzoo {

struct Rwkv7TimeMixConfig {
  int64_t hidden = 0, num_heads = 0, head_dim = 0, head_v_dim = 0;
  float norm_eps = 1e-5f;
  // fla's fuse_norm: kk = x * rsqrt(sum x^2 + 1e-6) (fused l2norm); else F.normalize (x / max(|x|, 1e-12)).
  bool fused_l2norm = true;
  int64_t value_dim() const { return num_heads * head_v_dim; }
};

// fla's LoRA: up(act(down(x))) (+ up bias).
struct Rwkv7Lora {
  Linear down;  // [rank, hidden]
  Linear up;    // [out, rank], optional bias
};

struct Rwkv7TimeMixWeights {
  TensorView x_r, x_w, x_k, x_v, x_a, x_g;  // [1, 1, hidden]
  TensorView k_k, k_a;                      // [hidden]
  TensorView r_k;                           // [H, K]
  Linear r_proj, k_proj, v_proj, o_proj;
  Rwkv7Lora w_lora, a_lora, g_lora;
  std::optional<Rwkv7Lora> v_lora;  // every layer but the first
  TensorView g_norm_weight, g_norm_bias;  // [value_dim]
};

class Rwkv7TimeMix {
 public:
  Rwkv7TimeMix() = default;
  // Validates shapes; errors name `name`.<tensor>.
  Rwkv7TimeMix(const Rwkv7TimeMixConfig& config, Rwkv7TimeMixWeights weights, const std::string& name);
  const Rwkv7TimeMixConfig& config() const { return c_; }
  bool first_layer() const { return !w_.v_lora; }
  const Rwkv7TimeMixWeights& weights() const { return w_; }
  // The vectors widened to f32: mix(c) for c in r, w, k, v, a, g (0..5).
  const std::vector<float>& mix(int c) const { return mix_[c]; }
  const std::vector<float>& k_k() const { return k_k_; }
  const std::vector<float>& k_a() const { return k_a_; }
  const std::vector<float>& r_k() const { return r_k_; }
  const LayerNorm& g_norm() const { return g_norm_; }
  uint64_t weight_bytes() const;
  // x [T, hidden] (the attn_norm output) -> out [T, hidden]. v_first [T, value_dim]: written by the first layer,
  // read by the others. Reads and updates each sequence's attn_shift and wkv in its slot of `memory`.
  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* v_first, float* out) const;

 private:
  Rwkv7TimeMixConfig c_;
  Rwkv7TimeMixWeights w_;
  std::vector<float> mix_[6], k_k_, k_a_, r_k_;  // mix_: x_r, x_w, x_k, x_v, x_a, x_g
  LayerNorm g_norm_;
};

// The time mix's per-(token, head) pieces on either side of the recurrence, shared with the GPU runner's
// benchmark and cases (the CPU twins of rwkv7_step_cuda.h's rwkv7_prepare_keys_cuda / rwkv7_output_cuda).
// kk = l2norm(k * k_k) per head, then k <- k * (1 + (a - 1) * k_a), a <- kk * a and kk <- -kk: the recurrence's
// k, b and a. k, a (already sigmoid), kk [T, H * K]; k_k, k_a [H * K].
void rwkv7_prepare_keys(float* k, float* a, float* kk, const float* k_k, const float* k_a, int64_t T, int64_t H,
                        int64_t K, bool fused_l2norm);
// o <- (o + sum_K(r * k * r_k) * v) * g per (token, head), o already group-normed. o, v, g [T, H * V]; r, k
// [T, H * K]; r_k [H * K].
void rwkv7_bonus_gate(float* o, const float* r, const float* k, const float* r_k, const float* v, const float* g,
                      int64_t T, int64_t H, int64_t K, int64_t V);

}  // namespace attnzoo
