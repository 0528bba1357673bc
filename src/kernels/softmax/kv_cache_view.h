#pragma once
// The KV cache as the softmax kernels read it (decode and paged prefill alike): flash-attn's
// flash_attn_with_kvcache layout. An int8 / float8_e4m3fn cache carries one f32 scale per row and kv head beside
// it (kernels/softmax/kv_quant.h). Contiguous [B, S_max, Hkv, D] (block_table == nullptr) or paged
// [num_blocks, block_size, Hkv, D]: key j of sequence b lives in physical block block_table[b][j / block_size]
// at row j % block_size. cache_seqlens[b] counts sequence b's valid keys, including the keys of the queries
// being attended now (the caller writes them first), so the queries are bottom-right aligned.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace attnzoo {

struct KvCacheView {
  TensorView k, v;                        // contiguous [B, S_max, Hkv, D] or paged [num_blocks, block_size, Hkv, D]
  const int32_t* cache_seqlens = nullptr;  // [B] (flash-attn's cache_seqlens / seqused_k)
  const int32_t* block_table = nullptr;    // [B, max_blocks_per_seq] physical block ids, paged caches only
  int64_t max_blocks_per_seq = 0;
  TensorView k_scale = {}, v_scale = {};  // int8 / fp8 caches: f32 [B or num_blocks, S_max or block_size, Hkv]
};

// Checks what every reader of a (possibly paged) cache trusts afterwards: each cache_seqlens[b] lies in
// [new_tokens[b], capacity] and, for a paged cache, every block a sequence uses is a block of the cache
// (entries past a sequence's last used block are never read and may hold padding such as -1).
// `cache_name` names the cache tensor in messages.
struct CacheLengthCheck {
  const int32_t* cache_seqlens = nullptr;
  const int32_t* block_table = nullptr;
  int64_t max_blocks_per_seq = 0;
  int64_t block_size = 0;  // rows per block (S_max for a contiguous cache)
  int64_t num_blocks = 0;  // dim 0 of the cache
  const char* cache_name = "k_cache";
};
void check_cache_lengths(const CacheLengthCheck& c, const std::vector<int64_t>& new_tokens);
// The same for `batch` sequences with `new_tokens` new tokens each (decode).
void check_cache_lengths(const CacheLengthCheck& c, int64_t batch, int64_t new_tokens);

}  // namespace attnzoo
