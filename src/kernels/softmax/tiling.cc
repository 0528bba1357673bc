#include "kernels/softmax/tiling.h"

#include <algorithm>

namespace attnzoo {

KeyRange visible_key_range(const MaskGeometry& mask, int64_t q_first, int64_t q_last, int64_t Tk,
                           int64_t block_k) {
  int64_t begin = 0, end = Tk;
  if (mask.causal) end = std::min(end, q_last + 1);
  if (mask.window > 0) begin = std::max<int64_t>(0, q_first - mask.window + 1);
  begin = (begin / block_k) * block_k;
  return {begin, std::max(begin, end)};
}

TileClass classify_tile(const MaskGeometry& mask, int64_t q_first, int64_t q_last, int64_t k_first,
                        int64_t k_last) {
  bool all = true;
  if (mask.causal) {
    if (k_first > q_last) return TileClass::skipped;
    all &= k_last <= q_first;
  }
  if (mask.window > 0) {
    if (k_last <= q_first - mask.window) return TileClass::skipped;
    all &= k_first > q_last - mask.window;
  }
  if (mask.block_mask) {
    const int64_t b = mask.block_mask->block();
    bool any_on = false, all_on = true;
    for (int64_t qb = q_first / b; qb <= q_last / b; ++qb)
      for (int64_t kb = k_first / b; kb <= k_last / b; ++kb) {
        const bool on = mask.block_mask->block_visible(qb, kb);
        any_on |= on;
        all_on &= on;
      }
    if (!any_on) return TileClass::skipped;
    all &= all_on;
  }
  return all ? TileClass::full : TileClass::partial;
}

void visible_runs(const MaskGeometry& mask, int64_t q_first, int64_t n, int64_t k0, int64_t cols,
                  std::vector<VisibleRun>& runs) {
  runs.clear();
  for (int64_t j = 0; j < cols; ++j) {
    uint32_t seen = 0;
    for (int64_t t = 0; t < n; ++t) seen |= uint32_t(mask.visible(q_first + t, k0 + j)) << t;
    if (seen == 0) continue;
    if (!runs.empty() && runs.back().end == j && runs.back().queries == seen)
      ++runs.back().end;
    else
      runs.push_back({int32_t(j), int32_t(j + 1), seen});
  }
}

PrefillPlan make_prefill_plan(const AttentionProblem& p, bool bf16_tiles) {
  PrefillPlan plan;
  plan.bf16_dot = bf16_tiles;
  if (bf16_tiles) plan.block_k = kBf16BlockK;
  // Key tiles follow the block-sparse granularity when it is small, so a skipped block is a skipped tile.
  if (p.opts.block_mask && p.opts.block_mask->block() < plan.block_k)
    plan.block_k = std::max<int64_t>(16, (p.opts.block_mask->block() / 16) * 16);
  plan.dv_padded = (p.Dv + 15) / 16 * 16;
  struct Weighted {
    PrefillTask task;
    int64_t cost;
  };
  std::vector<Weighted> all;
  const MaskGeometry mask = mask_geometry(p.opts);
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const SeqSpan& seq = p.seqs[s];
    for (int64_t q0 = 0; q0 < seq.Tq; q0 += plan.block_q) {
      const int64_t off = seq.Tk - seq.Tq;
      const int64_t q_last = std::min(seq.Tq, q0 + plan.block_q) - 1 + off;
      const KeyRange r = visible_key_range(mask, q0 + off, q_last, seq.Tk, plan.block_k);
      for (int64_t h = 0; h < p.Hkv; ++h) all.push_back({{int32_t(s), int32_t(h), q0}, r.end - r.begin});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Weighted& a, const Weighted& b) { return a.cost > b.cost; });
  plan.tasks.reserve(all.size());
  for (const auto& w : all) plan.tasks.push_back(w.task);
  return plan;
}

}  // namespace attnzoo
