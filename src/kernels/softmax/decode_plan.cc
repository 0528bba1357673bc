// Split-K for decode. A decode step reads every cached key once and does little arithmetic per byte, so the
// only way to use every core at batch 1 is to split each sequence's key range into chunks that run in
// parallel and merge their partial softmax states afterwards. A task reads all kv heads of its keys: in the
// [tokens, kv_heads, head_dim] layout that is one sequential stream, which hardware prefetchers follow and
// which touches each memory page once (reading one head at a time strides over the pages, and on machines
// with costly page walks, virtual machines above all, that halves the achieved bandwidth). Chunks stay long
// (>= min_chunk keys) so the merge and per-chunk set-up stay negligible next to the streaming.
#include <algorithm>
#include <tuple>
#include <vector>

#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/tiling.h"

namespace attnzoo {

DecodePlan make_decode_plan(const DecodeProblem& p, int num_threads, int64_t min_chunk, bool invariant) {
  DecodePlan plan;
  make_decode_plan(p, num_threads, plan, min_chunk, invariant);
  return plan;
}

void make_decode_plan(const DecodeProblem& p, int num_threads, DecodePlan& plan, int64_t min_chunk,
                      bool invariant) {
  plan.block_k = DecodePlan().block_k;
  plan.chunks.clear();
  plan.merges.clear();
  plan.num_slots = 0;
  // Block-sparse masks are skipped tile by tile, so tiles follow a small mask block.
  if (p.opts.block_mask && p.opts.block_mask->block() < plan.block_k)
    plan.block_k = std::max<int64_t>(16, (p.opts.block_mask->block() / 16) * 16);
  const MaskGeometry mask = mask_geometry(p.opts);
  static thread_local std::vector<KeyRange> ranges;
  ranges.resize(size_t(p.B));
  int64_t total = 0;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t len = p.seqlens[b];
    ranges[size_t(b)] = visible_key_range(mask, len - p.Tq, len - 1, len, plan.block_k);
    total += ranges[size_t(b)].end - ranges[size_t(b)].begin;
  }
  int64_t chunk = INT64_MAX;
  if (invariant) {
    // Chunks end at fixed key positions (multiples of min_chunk) and every row goes through the merge, even
    // from one chunk: a query's sums then follow from its own position alone, not from the batch, the other
    // queries of its call or the thread count (core/batch_invariance.h).
    chunk = std::max(plan.block_k, min_chunk / plan.block_k * plan.block_k);
  } else if (num_threads > 1) {
    const int64_t want = total / (4 * int64_t(num_threads));
    chunk = std::max(min_chunk, (want + plan.block_k - 1) / plan.block_k * plan.block_k);
  }
  // Even chunks, each a whole number of tiles. `chunk` is INT64_MAX on one thread, so the ceiling division
  // must not add before it divides.
  auto chunk_len = [&](int64_t len) {
    const int64_t n = len > 0 ? (len - 1) / chunk + 1 : 1;
    return std::max(plan.block_k, ((len + n - 1) / n + plan.block_k - 1) / plan.block_k * plan.block_k);
  };
  // The chunk boundaries inside r: even pieces of chunk_len, or (invariant) the multiples of `chunk`.
  auto next_end = [&](const KeyRange& r, int64_t k0) {
    if (invariant) return std::min(r.end, (k0 / chunk + 1) * chunk);
    return std::min(r.end, k0 + chunk_len(r.end - r.begin));
  };
  auto pieces_of = [&](const KeyRange& r) {
    int64_t n = 0;
    for (int64_t k0 = r.begin; k0 < r.end; k0 = next_end(r, k0)) ++n;
    return std::max<int64_t>(1, n);
  };
  int64_t key_tasks = 0;
  for (const KeyRange& r : ranges) key_tasks += pieces_of(r);
  // Too few tasks (short sequences, few of them): also split the kv heads, into as few groups as suffice.
  int64_t groups = 1;
  if (num_threads > 1)
    while (key_tasks * groups < 2 * int64_t(num_threads) && groups < p.Hkv) {
      do ++groups; while (p.Hkv % groups != 0);
    }
  plan.heads_per_task = p.Hkv / std::max<int64_t>(groups, 1);

  for (int64_t b = 0; b < p.B; ++b) {
    const KeyRange r = ranges[size_t(b)];
    const int64_t pieces = pieces_of(r);
    const bool merged = pieces > 1 || invariant;
    for (int64_t hk = 0; hk < p.Hkv; hk += plan.heads_per_task) {
      if (merged) plan.merges.push_back({int32_t(b), int32_t(hk), plan.num_slots, pieces});
      if (r.begin >= r.end) {  // nothing visible: one empty chunk still writes the rows (zeros, or the sink)
        plan.chunks.push_back({int32_t(b), int32_t(hk), r.begin, r.end, merged ? plan.num_slots++ : -1});
        continue;
      }
      for (int64_t k0 = r.begin; k0 < r.end; k0 = next_end(r, k0))
        plan.chunks.push_back({int32_t(b), int32_t(hk), k0, next_end(r, k0), merged ? plan.num_slots++ : -1});
    }
  }
  // Longest first, ties in the order made (sequence, heads, keys): what a stable sort gives, without the buffer
  // std::stable_sort allocates.
  std::sort(plan.chunks.begin(), plan.chunks.end(), [](const DecodeChunk& a, const DecodeChunk& b) {
    const int64_t la = a.k_end - a.k_begin, lb = b.k_end - b.k_begin;
    if (la != lb) return la > lb;
    return std::tie(a.b, a.hk_begin, a.k_begin) < std::tie(b.b, b.hk_begin, b.k_begin);
  });
}

}  // namespace attnzoo
