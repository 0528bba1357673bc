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

// When every paged layer is a sliding window, the widest window (a sequence then never needs a key older than that,
// so the pool gives back the blocks before it); 0 when any paged layer sees the whole context or none is paged.
int64_t window_of_all_paged(const std::vector<CacheSpec>& layers);
// Tokens a sequence of `tokens` tokens holds in blocks of `block_tokens` under that rule: the blocks covering the
// window plus the one being filled, or all of them when window_all is 0.
int64_t tokens_held(int64_t tokens, int64_t block_tokens, int64_t window_all);

}  // namespace attnzoo
