#pragma once
// What one layer remembers per sequence, as a type the memory pool can allocate from: the single source for
// `attnzoo inspect`, the explainer's memory figures, admission control and the pool's own sizing.
//   paged part  grows with tokens: `paged_tensors` tensors (2 = K and V, 1 = an MLA latent) of [heads, head_dim]
//               per token, in `dtype`, stored in the pool's fixed-size blocks; an int8 / fp8 dtype adds one f32
//               scale per token and head beside each tensor (kernels/softmax/kv_quant.h);
//   state part  fixed per sequence: `state_floats` f32 values (conv tail + delta-rule / SSM state), one pool slot.
// A parallel hybrid layer (Falcon-H1: attention beside Mamba-2) has both.
#include <cstdint>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/dtype.h"

namespace attnzoo {

enum class CacheKind : uint8_t {
  kv,         // softmax attention: K and V per token
  kv_window,  // sliding-window attention (blocks are kept; the kernels only read the window)
  latent,     // MLA: one compressed latent row per token, shared by every head
  state,      // linear / state-space layer: fixed-size state only
  kv_state,   // a layer with both (parallel attention + SSM)
};

const char* cache_kind_name(CacheKind k);

struct CacheSpec {
  CacheKind kind = CacheKind::kv;
  DType dtype = DType::f32;   // element type of the paged part
  int64_t paged_tensors = 0;  // 0: no per-token memory
  int64_t heads = 0, head_dim = 0;
  int64_t window = 0;         // >0: the layer's queries see at most this many keys
  int64_t state_floats = 0;   // fixed f32 state per sequence

  static CacheSpec kv(int64_t kv_heads, int64_t head_dim, int64_t window = 0);
  static CacheSpec latent(int64_t latent_dim);
  static CacheSpec state(int64_t floats);
  // The union of two layers' needs (a parallel layer): at most one paged part.
  static CacheSpec combine(const CacheSpec& a, const CacheSpec& b);

  bool paged() const { return paged_tensors > 0; }
  // Elements one token adds to one paged tensor (heads * head_dim). Every formula below is overflow-checked
  // and throws ArgumentError naming the size when a config asks for more than int64 can count.
  int64_t token_elems() const;
  // Scales one token adds to one paged tensor: `heads` for a quantized dtype, else 0.
  int64_t token_scales() const;
  int64_t bytes_per_token() const;  // elements and scales
  int64_t fixed_bytes() const;
  // Bytes a sequence of `tokens` tokens holds, its paged part rounded up to whole blocks of `block_tokens`.
  int64_t bytes_for(int64_t tokens, int64_t block_tokens) const;
  std::string describe() const;  // "kv bf16 [2 x 8 x 128]/token", "state 1.0 MiB"
};

// When every paged layer is a sliding window, the widest window; 0 when any paged layer sees the whole context or
// none is paged.
int64_t window_of_all_paged(const std::vector<CacheSpec>& layers);
// Tokens a sequence of `tokens` tokens holds in blocks of `block_tokens` when blocks before its last `window` keys
// go back to the pool: the blocks covering the window plus the one being filled, or all of them when window is 0.
int64_t tokens_held(int64_t tokens, int64_t block_tokens, int64_t window);

// How the memory pool lays out the paged layers (vLLM's KV-cache groups): the layers of one block group share a
// block table, a block is `slots` rows (one per layer of a group), and every group draws its blocks from one free
// list. When the paged layers are alike (same tensors, heads, head_dim) and their windows differ (full attention
// beside sliding windows: Gemma 2 / 3, gpt-oss, Cohere2), each window's layers are cut into groups of `slots`
// layers, so a sliding group gives back its blocks before the window as its sequence grows while the full group
// keeps the context, and a block id means the same bytes whichever group holds it. Otherwise (one window for all,
// paged layers of different shapes, or free_outside_window off) all paged layers are one group, windowed only when
// every one of them is (the widest window). A group's window is 0 when it keeps every block.
struct BlockGroup {
  int64_t window = 0;
  std::vector<int64_t> layers;  // ascending layer indices; layer j of the group is stored in slot j
};
struct BlockLayout {
  std::vector<BlockGroup> groups;  // a full-attention group (window 0) first when there is one
  int64_t slots = 0;               // layers per block: the widest group (a narrower one leaves slots unused)
  std::vector<int32_t> group_of, slot_of;  // per layer; -1 for a layer with no paged part
  // The window a layer's blocks are held for (0: the whole context, or not paged).
  int64_t held_window(size_t layer) const { return group_of[layer] < 0 ? 0 : groups[size_t(group_of[layer])].window; }
};
BlockLayout block_layout(const std::vector<CacheSpec>& layers, bool free_outside_window = true);
// Bytes each layer holds for a sequence of `tokens` tokens in blocks of `block_tokens`, windowed layers counted at
// what their block group keeps (the pool's accounting, what `inspect` reports).
std::vector<int64_t> bytes_held(const std::vector<CacheSpec>& layers, int64_t tokens, int64_t block_tokens);

}  // namespace attnzoo
