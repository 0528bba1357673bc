#include "layers/attention_layer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "kernels/softmax/kv_write.h"
#include "layers/paged_attention.h"

namespace attnzoo {
AttentionLayer::AttentionLayer(const AttentionConfig& config, Linear q, Linear k, Linear v, Linear o,
                               std::optional<RmsNorm> q_norm, std::optional<RmsNorm> k_norm, Rope rope,
                               const std::string& name)
    : config_(config), q_(std::move(q)), k_(std::move(k)), v_(std::move(v)), o_(std::move(o)),
      q_norm_(std::move(q_norm)), k_norm_(std::move(k_norm)), rope_(std::move(rope)) {
  const auto& c = config_;
  require(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "num_key_value_heads",
          "must divide num_attention_heads (" + std::to_string(c.num_heads) + "), got " + std::to_string(c.num_kv_heads));
  q_.require_shape(c.num_heads * c.head_dim * (c.output_gate ? 2 : 1), c.hidden, name + ".q_proj.weight");
  k_.require_shape(c.num_kv_heads * c.head_dim, c.hidden, name + ".k_proj.weight");
  v_.require_shape(c.num_kv_heads * c.head_dim, c.hidden, name + ".v_proj.weight");
  o_.require_shape(c.hidden, c.num_heads * c.head_dim, name + ".o_proj.weight");
  // Per head (Qwen3, head_dim entries) or across all heads (OLMo 2, heads * head_dim entries).
  if (q_norm_)
    require(q_norm_->dim() == c.head_dim || q_norm_->dim() == c.num_heads * c.head_dim,
            (name + ".q_norm.weight").c_str(), "must have head_dim or num_attention_heads * head_dim entries");
  if (k_norm_)
    require(k_norm_->dim() == c.head_dim || k_norm_->dim() == c.num_kv_heads * c.head_dim,
            (name + ".k_norm.weight").c_str(), "must have head_dim or num_key_value_heads * head_dim entries");
  require(rope_.config().head_dim == c.head_dim, "rope", "head_dim differs from the attention's");
  require(std::isfinite(c.softcap) && c.softcap >= 0.f, (name + ".softcap").c_str(), "must be a finite number >= 0");
  require(std::isfinite(c.temperature_beta) && (c.temperature_beta == 0.f || c.temperature_interval > 0),
          (name + ".temperature").c_str(),
          "llama_4_scaling_beta must be finite, with a positive original_max_position_embeddings");
}

void AttentionLayer::scale_queries(float* q, int64_t T, const int32_t* positions) const {
  if (config_.temperature_beta == 0.f) return;
  const int64_t qw = config_.num_heads * config_.head_dim;
  for (int64_t t = 0; t < T; ++t) {
    // transformers: 1 + beta * log(1 + floor(position / interval)), in f32
    const float steps = std::floor(float(positions[t]) / float(config_.temperature_interval));
    const float s = 1.f + config_.temperature_beta * std::log(1.f + steps);
    if (s == 1.f) continue;
    for (float* r = q + t * qw; r < q + (t + 1) * qw; ++r) *r *= s;
  }
}

void AttentionLayer::norm_qk(float* q, float* k, int64_t T) const {
  const int64_t qw = config_.num_heads * config_.head_dim, kw = config_.num_kv_heads * config_.head_dim;
  if (q_norm_) q_norm_->forward(q, T * qw / q_norm_->dim(), q_norm_->dim(), q, q_norm_->dim());
  if (k_norm_) k_norm_->forward(k, T * kw / k_norm_->dim(), k_norm_->dim(), k, k_norm_->dim());
}

void AttentionLayer::set_sinks(const TensorView& sinks, const std::string& name) {
  require(sinks.ndim == 1 && sinks.shape[0] == config_.num_heads && sinks.is_contiguous(), name.c_str(),
          "expected a contiguous [" + std::to_string(config_.num_heads) + "] tensor, got " + sinks.shape_str());
  require(sinks.dtype == DType::f32 || sinks.dtype == DType::bf16 || sinks.dtype == DType::f16, name.c_str(),
          "must be f32, bf16 or f16");
  std::vector<float> w(size_t(config_.num_heads));
  convert_to_f32(sinks.data, sinks.dtype, w.data(), w.size());
  for (float x : w) require(std::isfinite(x), name.c_str(), "must be finite");
  sinks_ = std::move(w);
}

uint64_t AttentionLayer::weight_bytes() const {
  return q_.weight_bytes() + k_.weight_bytes() + v_.weight_bytes() + o_.weight_bytes();
}

void AttentionLayer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), D = c.head_dim;
  const int64_t qw = c.num_heads * D, kw = c.num_kv_heads * D;
  // Per-thread scratch, grown once: a decode step allocates nothing here.
  thread_local std::vector<float> q, k, v, attn, gate, qg;
  q.resize(size_t(T * qw));
  k.resize(size_t(T * kw));
  v.resize(size_t(T * kw));
  attn.resize(size_t(T * qw));
  if (c.output_gate) {
    // Split each head's [q ; gate] pair so q is the contiguous [T, H, D] the norm, RoPE and kernels expect.
    qg.resize(size_t(T * qw * 2));
    Linear::forward_shared({{&q_, qg.data()}, {&k_, k.data()}, {&v_, v.data()}}, x, T);
    gate.resize(size_t(T * qw));
    for (int64_t r = 0; r < T * c.num_heads; ++r) {
      const float* src = qg.data() + r * 2 * D;
      std::copy(src, src + D, q.data() + r * D);
      std::copy(src + D, src + 2 * D, gate.data() + r * D);
    }
  } else {
    Linear::forward_shared({{&q_, q.data()}, {&k_, k.data()}, {&v_, v.data()}}, x, T);
  }
  norm_qk(q.data(), k.data(), T);
  rope_.apply(q.data(), T, c.num_heads, qw, batch.positions.data());
  rope_.apply(k.data(), T, c.num_kv_heads, kw, batch.positions.data());
  scale_queries(q.data(), T, batch.positions.data());

  AttentionOptions opts;
  opts.scale = c.scale;
  opts.causal = true;
  opts.window = c.window;
  opts.softcap = c.softcap;
  opts.sinks = sinks_.empty() ? nullptr : sinks_.data();
  write_kv_paged(TensorView::contiguous(k.data(), DType::f32, {T, c.num_kv_heads, D}),
                 TensorView::contiguous(v.data(), DType::f32, {T, c.num_kv_heads, D}),
                 batch.tables(memory).slot_mapping.data(), memory.k, memory.v, memory.k_scale, memory.v_scale);
  // Sink layers keep f32 queries: with bf16 queries and weights the gpt-oss test model's logits moved 0.067 from
  // the f32 model's (f32 queries: 0.035, transformers' own bf16 model: 0.043), where the Llama / Qwen3 / Qwen3-Next
  // ones moved by 0.0006 at most.
  const bool bf16_queries = reduced_products(q_.reduced_weights()) && sinks_.empty();
  paged_attention(q.data(), c.num_heads, D, batch, memory, opts, attn.data(), bf16_queries);
  if (c.output_gate)
    for (size_t i = 0; i < size_t(T * qw); ++i) attn[i] *= 1.f / (1.f + std::exp(-gate[i]));
  o_.forward(attn.data(), T, out);
}

// The q/k half of forward(), kept beside it for the explainer's trace (it must apply the same steps in the
// same order: projection, output-gate split, q/k norm, RoPE, query temperature).
void AttentionLayer::project_qk(const float* x, const Batch& batch, float* q, float* k) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), D = c.head_dim;
  if (c.output_gate) {
    std::vector<float> qg(size_t(T * c.num_heads * D * 2));
    q_.forward(x, T, qg.data());
    for (int64_t r = 0; r < T * c.num_heads; ++r) std::copy_n(qg.data() + r * 2 * D, D, q + r * D);
  } else {
    q_.forward(x, T, q);
  }
  k_.forward(x, T, k);
  norm_qk(q, k, T);
  rope_.apply(q, T, c.num_heads, c.num_heads * D, batch.positions.data());
  rope_.apply(k, T, c.num_kv_heads, c.num_kv_heads * D, batch.positions.data());
  scale_queries(q, T, batch.positions.data());
}

void AttentionLayer::trace(const float* x, const Batch& batch, const LayerMemory&, LayerTrace& out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens();
  out.kind = kind();
  out.num_heads = c.num_heads;
  out.num_kv_heads = c.num_kv_heads;
  out.head_dim = c.head_dim;
  out.scale = std::isnan(c.scale) ? 1.f / std::sqrt(float(c.head_dim)) : c.scale;
  out.window = c.window;
  out.softcap = c.softcap;
  out.sinks = sinks_;
  out.q.resize(size_t(T * c.num_heads * c.head_dim));
  out.k.resize(size_t(T * c.num_kv_heads * c.head_dim));
  project_qk(x, batch, out.q.data(), out.k.data());
}

}  // namespace attnzoo
