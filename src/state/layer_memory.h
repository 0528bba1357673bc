#pragma once
// The memory one layer is handed by the pool for a forward call: its own paged K/V (or MLA latent) tensors and
// its own slab of recurrent-state slots. Which blocks and which slot belong to which sequence comes with the
// batch (the block tables and slot mapping of the layer's block group, the state slots); a layer never sees
// another layer's memory, and never owns any.
#include <cstdint>
#include <vector>

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
  // Which of the batch's block tables this layer's blocks are named in (CacheManager::layout(): one per block group).
  int32_t block_group = 0;

  float* state(int32_t slot) const { return states + int64_t(slot) * state_stride; }
  int64_t block_tokens() const { return k.ndim == 4 ? k.shape[1] : 0; }
};

// One block group's tables for a batch (filled by CacheManager::fill_batch_tables): where the sequences' tokens
// are. A block a sliding window gave back reads as block 0 (its keys are never read).
struct BlockTables {
  std::vector<int32_t> block_tables;  // [S, max_blocks] pool block ids in token order
  int64_t max_blocks = 0;
  std::vector<int64_t> slot_mapping;  // [T] where token t's K/V goes: block * block_size + offset (vLLM's name)

  const int32_t* block_table(int64_t s) const { return block_tables.data() + s * max_blocks; }
};

}  // namespace attnzoo
