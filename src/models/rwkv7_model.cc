#include "models/rwkv7_model.h"

#include <algorithm>

#include "layers/rwkv7_state.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {

Rwkv7Model::Rwkv7Model(ModelFiles files, ModelInfo info, Embedding embed, std::vector<Rwkv7Block> blocks,
                       LayerNorm norm, Linear lm_head)
    : files_(std::move(files)), info_(std::move(info)), embed_(std::move(embed)), blocks_(std::move(blocks)),
      norm_(std::move(norm)), lm_head_(std::move(lm_head)) {
  info_.decode_weight_bytes = lm_head_.weight_bytes();
  for (const auto& b : blocks_) info_.decode_weight_bytes += b.time_mix.weight_bytes() + b.channel_mix.weight_bytes();
}

CacheSpec Rwkv7Model::cache_spec(const Rwkv7TimeMixConfig& c) {
  const int64_t elems = Rwkv7State::elements(c.hidden, c.num_heads, c.head_dim, c.head_v_dim);
  return {"state", 0, elems * int64_t(sizeof(float)), 0, 0};
}

std::unique_ptr<SequenceState> Rwkv7Model::new_sequence() const {
  auto s = std::make_unique<SequenceState>();
  s->owner = this;
  for (const auto& b : blocks_) {
    const Rwkv7TimeMixConfig& c = b.time_mix.config();
    s->layers.push_back(std::make_unique<Rwkv7State>(c.hidden, c.num_heads, c.head_dim, c.head_v_dim));
  }
  return s;
}

void Rwkv7Model::run(const Batch& batch, bool last_only, float* logits) const {
  const int64_t T = batch.num_tokens(), C = info_.hidden_size;
  const int64_t Dv = blocks_.empty() ? 0 : blocks_[0].time_mix.config().value_dim();
  std::vector<float> x(size_t(T * C)), h(size_t(T * C)), y(size_t(T * C)), v_first(size_t(T * Dv));
  embed_.lookup(batch.tokens.data(), T, x.data());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Rwkv7Block& b = blocks_[l];
    if (b.pre_norm) b.pre_norm->forward(x.data(), T, x.data());  // the residual stream itself is normed
    b.attn_norm.forward(x.data(), T, h.data());
    b.time_mix.forward(h.data(), batch, int64_t(l), v_first.data(), y.data());
    for (int64_t i = 0; i < T * C; ++i) x[size_t(i)] += y[size_t(i)];
    b.ffn_norm.forward(x.data(), T, h.data());
    b.channel_mix.forward(h.data(), batch, int64_t(l), y.data());
    for (int64_t i = 0; i < T * C; ++i) x[size_t(i)] += y[size_t(i)];
  }
  // Only the rows whose logits are wanted go through the final norm and the vocabulary projection.
  int64_t rows = T;
  if (last_only) {
    rows = batch.num_sequences();
    for (int64_t s = 0; s < rows; ++s) {
      const int64_t last = batch.seq_begin(s) + batch.seq_len(s) - 1;
      std::copy(x.begin() + last * C, x.begin() + (last + 1) * C, h.begin() + s * C);
    }
    norm_.forward(h.data(), rows, h.data());
  } else {
    norm_.forward(x.data(), rows, h.data());
  }
  lm_head_.forward(h.data(), rows, logits);
}

std::vector<LayerTrace> Rwkv7Model::run_trace(const Batch& batch) const {
  std::vector<float> logits(size_t(batch.num_sequences() * info_.vocab_size));
  run(batch, true, logits.data());
  std::vector<LayerTrace> trace(blocks_.size());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Rwkv7TimeMixConfig& c = blocks_[l].time_mix.config();
    auto* st = static_cast<Rwkv7State*>(batch.sequences[0]->layers[l].get());
    trace[l].kind = info_.layers[l].kind;
    trace[l].state_norms = head_state_norms(st->wkv(), c.num_heads, c.head_dim * c.head_v_dim);
  }
  return trace;
}

}  // namespace attnzoo
