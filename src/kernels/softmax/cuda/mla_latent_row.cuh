#pragma once
// Where a latent row sits in the cache, for both MLA attention kernels: the tile loaders look each row up once
// (one thread per row) and every thread then reads the row through that offset.
#include <cstdint>

#include "kernels/softmax/cuda/mla_decode_params.h"

namespace attnzoo::cuda_mla {

// Element offset of position `pos` of w's sequence through its block table; -1 past the chunk's last row.
__device__ __forceinline__ int64_t latent_row(const MlaDecodeParams& p, const MlaWork& w, int pos) {
  if (pos >= w.k_end) return -1;
  const int blk = pos / p.block_size;
  const int64_t phys = p.block_table ? p.block_table[int64_t(w.b) * p.max_blocks_per_seq + blk] : w.b;
  return phys * p.latent_block + int64_t(pos - blk * p.block_size) * p.latent_token;
}

}  // namespace attnzoo::cuda_mla
