#pragma once
// RWKV-7 as flash-linear-attention's RWKV7ForCausalLM runs it. Its blocks do not fit DecoderModel (LayerNorm
// with bias, a channel mix that keeps a token-shift state, and a value residual carried from layer 0 to every
// later layer), so the stack is written out here:
//   x = embed(tokens);  v_first = (set by layer 0)
//   per block: r = pre_norm?(x) (layer 0 only) else x
//              r += time_mix(attn_norm(r), v_first);  x = r + channel_mix(ffn_norm(r))
//   logits = lm_head(norm(x))
// Per layer and sequence the state is one pool slot, read through Rwkv7State: [attn_shift | ffn_shift | wkv (H, K,
// V)], f32.
#include <optional>
#include <vector>

#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/rwkv7_channel_mix.h"
#include "layers/rwkv7_time_mix.h"
#include "loader/model_dir.h"
#include "models/describe.h"
#include "models/model.h"

namespace attnzoo {

struct Rwkv7Block {
  std::optional<LayerNorm> pre_norm;  // layer 0 when norm_first
  LayerNorm attn_norm;
  Rwkv7TimeMix time_mix;
  LayerNorm ffn_norm;
  Rwkv7ChannelMix channel_mix;
};

class Rwkv7Model : public Model {
 public:
  Rwkv7Model(ModelFiles files, ModelInfo info, Embedding embed, std::vector<Rwkv7Block> blocks, LayerNorm norm,
             Linear lm_head);

  const ModelInfo& info() const override { return info_; }
  const Config& config() const override { return files_.config(); }
  // The per-layer state of one sequence: one slot of the memory pool.
  static CacheSpec cache_spec(const Rwkv7TimeMixConfig& c);
  // The parts, for the GPU runner (models/cuda/rwkv7_cuda_runner.h).
  const Embedding& embed() const { return embed_; }
  const std::vector<Rwkv7Block>& blocks() const { return blocks_; }
  const LayerNorm& norm() const { return norm_; }
  const Linear& lm_head() const { return lm_head_; }

 protected:
  void run(const Batch& batch, std::span<const int64_t> rows, float* logits) const override;
  // Per layer: the Frobenius norm of each head's wkv state after the prompt.
  std::vector<LayerTrace> run_trace(const Batch& batch) const override;
  std::unique_ptr<DeviceRunner> make_device_runner(Device device, DType kv_dtype) const override;

 private:
  ModelFiles files_;  // keeps the mapping alive: weights below are views into it
  ModelInfo info_;
  Embedding embed_;
  std::vector<Rwkv7Block> blocks_;
  LayerNorm norm_;
  Linear lm_head_;
};

}  // namespace attnzoo
