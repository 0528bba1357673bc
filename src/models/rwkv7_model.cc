#include "models/rwkv7_model.h"

#include <algorithm>

#include "layers/rwkv7_state.h"
#include "layers/sequence_schedule.h"
#include "models/cuda/rwkv7_cuda_runner.h"

namespace attnzoo {

Rwkv7Model::Rwkv7Model(ModelFiles files, ModelInfo info, Embedding embed, std::vector<Rwkv7Block> blocks,
                       LayerNorm norm, Linear lm_head)
    : files_(std::move(files)), info_(std::move(info)), embed_(std::move(embed)), blocks_(std::move(blocks)),
      norm_(std::move(norm)), lm_head_(std::move(lm_head)) {
  info_.decode_weight_bytes = lm_head_.weight_bytes();
  for (const auto& b : blocks_) info_.decode_weight_bytes += b.time_mix.weight_bytes() + b.channel_mix.weight_bytes();
}

CacheSpec Rwkv7Model::cache_spec(const Rwkv7TimeMixConfig& c) {
  return CacheSpec::state(Rwkv7State::elements(c.hidden, c.num_heads, c.head_dim, c.head_v_dim));
}

void Rwkv7Model::run(const Batch& batch, std::span<const int64_t> rows, float* logits) const {
  const int64_t T = batch.num_tokens(), C = info_.hidden_size;
  const int64_t Dv = blocks_.empty() ? 0 : blocks_[0].time_mix.config().value_dim();
  std::vector<float> x(size_t(T * C)), h(size_t(T * C)), y(size_t(T * C)), v_first(size_t(T * Dv));
  embed_.lookup(batch.tokens.data(), T, x.data());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Rwkv7Block& b = blocks_[l];
    if (b.pre_norm) b.pre_norm->forward(x.data(), T, x.data());  // the residual stream itself is normed
    b.attn_norm.forward(x.data(), T, h.data());
    const LayerMemory memory = layer_memory(int64_t(l));
    b.time_mix.forward(h.data(), batch, memory, v_first.data(), y.data());
    for (int64_t i = 0; i < T * C; ++i) x[size_t(i)] += y[size_t(i)];
    b.ffn_norm.forward(x.data(), T, h.data());
    b.channel_mix.forward(h.data(), batch, memory, y.data());
    for (int64_t i = 0; i < T * C; ++i) x[size_t(i)] += y[size_t(i)];
  }
  // Only the rows whose logits are wanted go through the final norm and the vocabulary projection.
  const int64_t n_rows = int64_t(rows.size());
  if (n_rows == 0) return;
  for (int64_t i = 0; i < n_rows; ++i) std::copy_n(x.begin() + rows[size_t(i)] * C, C, h.begin() + i * C);
  norm_.forward(h.data(), n_rows, h.data());
  lm_head_.forward(h.data(), n_rows, logits);
}

std::unique_ptr<DeviceRunner> Rwkv7Model::make_device_runner(Device device, DType kv_dtype) const {
  return make_rwkv7_cuda_runner(*this, device, kv_dtype);
}

std::vector<LayerTrace> Rwkv7Model::run_trace(const Batch& batch) const {
  const int64_t last = batch.num_tokens() - 1;
  std::vector<float> logits(size_t(info_.vocab_size));
  run(batch, std::span(&last, 1), logits.data());
  std::vector<LayerTrace> trace(blocks_.size());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Rwkv7TimeMixConfig& c = blocks_[l].time_mix.config();
    const Rwkv7State st(layer_memory(int64_t(l)), batch, 0, c.hidden);
    trace[l].kind = info_.layers[l].kind;
    trace[l].state_norms = head_state_norms(st.wkv(), c.num_heads, c.head_dim * c.head_v_dim);
  }
  return trace;
}

}  // namespace attnzoo
