#pragma once
// How prefill work is cut into tasks and how a (query block, key tile) pair relates to the mask. Shared by
// the prefill kernel, the explainer's tile-grid figure and the tests, so all three agree on what was skipped.
#include <cstdint>
#include <vector>

#include "kernels/softmax/problem.h"

namespace attnzoo {

enum class TileClass : uint8_t { skipped, full, partial };

struct KeyRange {
  int64_t begin, end;  // [begin, end), begin aligned down to the key tile size
};

struct PrefillTask {
  int32_t seq;
  int32_t kv_head;
  int64_t q_begin;
};

// Keys per tile when the products run on bf16 tiles: twice the f32 tile, so each query row's softmax bookkeeping
// (maximum, sum, rescale) and each output tile's load and store through the AMX tiles serve twice the products.
constexpr int64_t kBf16BlockK = 128;

struct PrefillPlan {
  int64_t block_q = 64, block_k = 64, dv_padded = 0;
  bool bf16_dot = false;  // bf16 q/k/v multiplied as bf16 pairs (bf16_pair_gemm: AMX tiles or vdpbf16ps)
  std::vector<PrefillTask> tasks;  // heaviest first, so dynamic claiming balances causal work
};

struct TileRowContext {
  float score_scale;  // 1 when the queries were pre-scaled
  float softcap;
  float alibi_slope;
  bool partial;
  const MaskGeometry* mask;
  int64_t qpos;
  int64_t kpos0;
};

// Keys any of the queries at positions [q_first, q_last] may see.
KeyRange visible_key_range(const MaskGeometry& mask, int64_t q_first, int64_t q_last, int64_t Tk, int64_t block_k);
// Whether every, no, or some (query, key) pair of the tile is visible.
TileClass classify_tile(const MaskGeometry& mask, int64_t q_first, int64_t q_last, int64_t k_first, int64_t k_last);
// Keys [begin, end) of a tile that the same queries see: bit t of `queries` is query q_first + t.
struct VisibleRun {
  int32_t begin, end;
  uint32_t queries;
};
// The keys [k0, k0 + cols) of a partly visible tile, in runs of equal visibility from the n <= 32 queries at
// positions q_first ..; keys no query sees are left out. Decode multiplies values by these runs alone: a hidden
// key's weight is 0, but 0 * NaN is NaN.
void visible_runs(const MaskGeometry& mask, int64_t q_first, int64_t n, int64_t k0, int64_t cols,
                  std::vector<VisibleRun>& runs);
// bf16_tiles: the products run on bf16_pair_gemm (core/dispatch.h's bf16_tiles_enabled() and bf16 q / k / v).
PrefillPlan make_prefill_plan(const AttentionProblem& p, bool bf16_tiles);

}  // namespace attnzoo
