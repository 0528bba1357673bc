#include "layers/attention_layer.h"

#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"

namespace attnzoo {
namespace {

void check_linear(const Linear& l, int64_t out, int64_t in, const std::string& name) {
  require(l.out_features() == out && l.in_features() == in, name.c_str(),
          "expected weight [" + std::to_string(out) + ", " + std::to_string(in) + "], got " + l.weight().shape_str());
}

}  // namespace

AttentionLayer::AttentionLayer(const AttentionConfig& config, Linear q, Linear k, Linear v, Linear o,
                               std::optional<RmsNorm> q_norm, std::optional<RmsNorm> k_norm, Rope rope,
                               const std::string& name)
    : config_(config), q_(std::move(q)), k_(std::move(k)), v_(std::move(v)), o_(std::move(o)),
      q_norm_(std::move(q_norm)), k_norm_(std::move(k_norm)), rope_(std::move(rope)) {
  const auto& c = config_;
  require(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "num_key_value_heads",
          "must divide num_attention_heads (" + std::to_string(c.num_heads) + "), got " + std::to_string(c.num_kv_heads));
  check_linear(q_, c.num_heads * c.head_dim, c.hidden, name + ".q_proj.weight");
  check_linear(k_, c.num_kv_heads * c.head_dim, c.hidden, name + ".k_proj.weight");
  check_linear(v_, c.num_kv_heads * c.head_dim, c.hidden, name + ".v_proj.weight");
  check_linear(o_, c.hidden, c.num_heads * c.head_dim, name + ".o_proj.weight");
  if (q_norm_) require(q_norm_->dim() == c.head_dim, (name + ".q_norm.weight").c_str(), "must have head_dim entries");
  if (k_norm_) require(k_norm_->dim() == c.head_dim, (name + ".k_norm.weight").c_str(), "must have head_dim entries");
  require(rope_.config().head_dim == c.head_dim, "rope", "head_dim differs from the attention's");
}

std::unique_ptr<LayerState> AttentionLayer::new_state() const {
  return std::make_unique<KvCache>(config_.num_kv_heads, config_.head_dim, config_.cache_block_tokens, config_.window);
}

uint64_t AttentionLayer::weight_bytes() const {
  return q_.weight_bytes() + k_.weight_bytes() + v_.weight_bytes() + o_.weight_bytes();
}

void AttentionLayer::forward(const float* x, const Batch& batch, int64_t layer_index, float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), D = c.head_dim;
  const int64_t qw = c.num_heads * D, kw = c.num_kv_heads * D;
  std::vector<float> q(size_t(T * qw)), k(size_t(T * kw)), v(size_t(T * kw)), attn(size_t(T * qw));
  q_.forward(x, T, q.data());
  k_.forward(x, T, k.data());
  v_.forward(x, T, v.data());
  if (q_norm_) q_norm_->forward(q.data(), T * c.num_heads, D, q.data(), D);
  if (k_norm_) k_norm_->forward(k.data(), T * c.num_kv_heads, D, k.data(), D);
  rope_.apply(q.data(), T, c.num_heads, qw, batch.positions.data());
  rope_.apply(k.data(), T, c.num_kv_heads, kw, batch.positions.data());

  AttentionOptions opts;
  opts.scale = c.scale;
  opts.causal = true;
  opts.window = c.window;
  const int64_t S = batch.num_sequences();
  bool all_decode = true;
  for (int64_t s = 0; s < S; ++s) {
    auto* cache = static_cast<KvCache*>(batch.sequences[size_t(s)]->layers[size_t(layer_index)].get());
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    cache->append(k.data() + b * kw, v.data() + b * kw, n, kw);
    all_decode = all_decode && n <= kMaxDecodeQueries;
  }
  auto attend = [&](int64_t s) {
    const auto* cache = static_cast<const KvCache*>(batch.sequences[size_t(s)]->layers[size_t(layer_index)].get());
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    const TensorView qv = TensorView::contiguous(q.data() + b * qw, DType::f32, {1, n, c.num_heads, D});
    const TensorView ov = TensorView::contiguous(attn.data() + b * qw, DType::f32, {1, n, c.num_heads, D});
    if (n <= kMaxDecodeQueries)
      attention_decode(qv, cache->decode_view(), ov, opts);
    else
      attention_prefill(qv, cache->keys(), cache->values(), ov, opts);
  };
  // Many short (decode) sequences: one task each, the kernels then run serially inside. Otherwise one sequence at
  // a time, each kernel spreading its own work over the pool.
  if (all_decode && S > 1)
    ThreadPool::global().parallel_for(S, [&](int64_t s, int) { attend(s); });
  else
    for (int64_t s = 0; s < S; ++s) attend(s);
  o_.forward(attn.data(), T, out);
}

}  // namespace attnzoo
