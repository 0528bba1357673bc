#pragma once
// The memory one layer is handed by the pool for a forward call: its own paged K/V (or MLA latent) tensors and
// its own slab of recurrent-state slots. Which blocks and which slot belong to which sequence comes with the
// batch (block tables, slot mapping, state slots), the same for every layer; a layer never sees another
// layer's memory, and never owns any.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

struct LayerMemory {
  // Paged part in flash-attn's layout [num_blocks, block_tokens, heads, head_dim], in the pool's KV dtype; `v`
  // is empty for a single-tensor (latent) cache, both are empty for a layer with no per-token memory.
  TensorView k, v;
  // int8 / fp8 pools: each paged tensor's f32 scales [num_blocks, block_tokens, heads] (kernels/softmax/kv_quant.h);
  // empty otherwise.
  TensorView k_scale, v_scale;
  // Fixed part: slot i of this layer is the f32 range [states + i * state_stride, + state_floats).
  float* states = nullptr;
  int64_t state_stride = 0;

  float* state(int32_t slot) const { return states + int64_t(slot) * state_stride; }
  int64_t block_tokens() const { return k.ndim == 4 ? k.shape[1] : 0; }
};

}  // namespace attnzoo
