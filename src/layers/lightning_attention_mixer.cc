#include "layers/lightning_attention_mixer.h"

#include <cmath>

#include "core/checked.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/simple_gla/simple_gla.h"
#include "layers/activations.h"
#include "layers/linear_prefill_mode.h"
#include "layers/norm.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {

std::vector<float> minimax_slopes(int64_t heads, int64_t layer, int64_t layers) {
  const double base = 1.0 / std::pow(2.0, 8.0 / double(heads));
  const double factor = 1.0 - double(layer) / (double(layers) - 1.0 + 1e-5) + 1e-5;
  std::vector<float> out;
  for (int64_t h = 0; h < heads; ++h) out.push_back(float(std::pow(base, double(h + 1)) * factor));
  return out;
}

LightningAttentionMixer::LightningAttentionMixer(const LightningAttentionConfig& config,
                                                 LightningAttentionWeights weights, const std::string& name)
    : config_(config), w_(std::move(weights)) {
  const auto& c = config_;
  require(c.hidden > 0 && c.heads > 0 && c.head_dim > 0, "lightning_attention",
          "hidden, heads and head_dim must be positive");
  require(int64_t(c.slopes.size()) == c.heads, "slopes", "needs one decay rate per head");
  for (float s : c.slopes) require(std::isfinite(s) && s >= 0.f, "slopes", "decay rates must be finite and >= 0");
  const int64_t inner = c.inner();
  w_.qkv_proj.require_shape(3 * inner, c.hidden, name + ".qkv_proj.weight");
  w_.output_gate.require_shape(inner, c.hidden, name + ".output_gate.weight");
  w_.out_proj.require_shape(c.hidden, inner, name + ".out_proj.weight");
  norm_ = widen_vector(w_.norm, inner, name + ".norm.weight");
  for (float s : c.slopes) log_decay_.push_back(-s);
}

CacheSpec LightningAttentionMixer::spec(const LightningAttentionConfig& c) {
  return CacheSpec::state(checked_mul(checked_mul(c.heads, c.head_dim, "state"), c.head_dim, "state"));
}

uint64_t LightningAttentionMixer::weight_bytes() const {
  return w_.qkv_proj.weight_bytes() + w_.output_gate.weight_bytes() + w_.out_proj.weight_bytes() +
         norm_.size() * sizeof(float);
}

void LightningAttentionMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory,
                                      float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), H = c.heads, D = c.head_dim, inner = c.inner();
  if (T == 0) return;
  std::vector<float> qkv(size_t(T * 3 * inner)), q(size_t(T * inner)), k(size_t(T * inner)), v(size_t(T * inner)),
      gate(size_t(T * inner));
  // The output gate reads the layer's input too: one quantization (or bf16 rounding) of x for both, the same bits.
  Linear::forward_shared({{&w_.qkv_proj, qkv.data()}, {&w_.output_gate, gate.data()}}, x, T);
  apply_activation_inplace(Activation::silu, qkv.data(), T * 3 * inner);
  // Per token and head the projection holds [q | k | v]; the kernels want each as [T, H, D].
  constexpr int64_t kTokensPerTask = 16;
  ThreadPool::global().parallel_for((T + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    for (int64_t t = task * kTokensPerTask; t < std::min(T, (task + 1) * kTokensPerTask); ++t)
      for (int64_t h = 0; h < H; ++h) {
        const float* src = qkv.data() + (t * H + h) * 3 * D;
        std::copy_n(src, D, q.data() + (t * H + h) * D);
        std::copy_n(src + D, D, k.data() + (t * H + h) * D);
        std::copy_n(src + 2 * D, D, v.data() + (t * H + h) * D);
      }
  });
  std::vector<float> o(size_t(T * inner));
  const TensorView g_gamma = TensorView::contiguous(const_cast<float*>(log_decay_.data()), DType::f32, {H});
  for_each_sequence(batch, 1, [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    auto view = [&](float* p) { return TensorView::contiguous(p + b * inner, DType::f32, {1, n, H, D}); };
    GlaOptions opts;
    opts.scale = 1.f;  // MiniMax does not scale the queries
    opts.initial_state =
        TensorView::contiguous(memory.state(batch.state_slots[size_t(s)]), DType::f32, {1, H, D, D});
    opts.final_state = opts.initial_state;  // the kernels read each head's state before writing it
    if (n == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
      recurrent_simple_gla(view(q.data()), view(k.data()), view(v.data()), TensorView{}, g_gamma, view(o.data()),
                           opts);
    else
      chunk_simple_gla(view(q.data()), view(k.data()), view(v.data()), TensorView{}, g_gamma, view(o.data()), opts);
  });
  // rmsnorm over all heads' features, then the sigmoid gate of the layer's input.
  rms_norm(o.data(), T, inner, inner, norm_.data(), c.norm_eps, o.data(), inner);
  for (int64_t i = 0; i < T * inner; ++i) o[size_t(i)] *= 1.f / (1.f + std::exp(-gate[size_t(i)]));
  w_.out_proj.forward(o.data(), T, out);
}

void LightningAttentionMixer::trace(const float*, const Batch& batch, const LayerMemory& memory,
                                    LayerTrace& out) const {
  out.kind = kind();
  if (batch.num_sequences() < 1) return;
  out.state_norms = head_state_norms(memory.state(batch.state_slots[0]), config_.heads,
                                     config_.head_dim * config_.head_dim);
}

}  // namespace attnzoo
