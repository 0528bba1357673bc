#pragma once
// The tile grid a prefill call walks, for the explainer's "FlashAttention's tiles" figure. It is derived from
// the very functions the prefill kernel uses (make_prefill_plan, visible_key_range, classify_tile), so the
// picture cannot drift from what the kernel does.
#include <cstdint>
#include <vector>

#include "kernels/softmax/options.h"

namespace attnzoo::explain {

enum class TileVisit : uint8_t {
  outside_range = 0,  // never looked at: before/after the query block's visible key range
  skipped = 1,        // inside the range but classify_tile said no pair is visible (block-sparse holes)
  full = 2,           // every pair visible: no per-element mask work
  partial = 3,        // some pairs visible: the kernel masks element by element
};

struct TileGrid {
  int64_t Tq = 0, Tk = 0, block_q = 0, block_k = 0;
  int64_t num_q_blocks = 0, num_k_tiles = 0;
  std::vector<TileVisit> visits;        // [num_q_blocks, num_k_tiles], row = query block
  std::vector<int64_t> task_order;      // query blocks in the order the plan hands them to threads
  int64_t full_tiles() const;
  int64_t partial_tiles() const;
  TileVisit at(int64_t qb, int64_t kt) const { return visits[size_t(qb * num_k_tiles + kt)]; }
};

// One sequence of Tq queries (bottom-right aligned) against Tk keys, one head. Throws ArgumentError when
// Tq or Tk is not positive.
TileGrid prefill_tile_grid(int64_t Tq, int64_t Tk, const AttentionOptions& opts);

}  // namespace attnzoo::explain
