#include "explain/tile_grid.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/softmax/problem.h"
#include "kernels/softmax/tiling.h"

namespace attnzoo::explain {

int64_t TileGrid::full_tiles() const { return int64_t(std::count(visits.begin(), visits.end(), TileVisit::full)); }

int64_t TileGrid::partial_tiles() const {
  return int64_t(std::count(visits.begin(), visits.end(), TileVisit::partial));
}

TileGrid prefill_tile_grid(int64_t Tq, int64_t Tk, const AttentionOptions& opts) {
  require(Tq >= 1, "Tq", "must be >= 1, got " + std::to_string(Tq));
  require(Tk >= 1, "Tk", "must be >= 1, got " + std::to_string(Tk));
  // The plan only looks at the geometry, so a problem without data is enough.
  AttentionProblem p;
  p.Hq = p.Hkv = 1;
  p.D = p.Dv = 16;
  p.opts = opts;
  p.seqs.push_back(SeqSpan{0, 0, 0, 0, Tq, Tk});
  const PrefillPlan plan = make_prefill_plan(p, /*bf16_tiles=*/false);  // the f32 plan's grid

  TileGrid g;
  g.Tq = Tq;
  g.Tk = Tk;
  g.block_q = plan.block_q;
  g.block_k = plan.block_k;
  g.num_q_blocks = (Tq + plan.block_q - 1) / plan.block_q;
  g.num_k_tiles = (Tk + plan.block_k - 1) / plan.block_k;
  g.visits.assign(size_t(g.num_q_blocks * g.num_k_tiles), TileVisit::outside_range);
  const MaskGeometry mask = mask_geometry(opts);
  const int64_t offset = Tk - Tq;
  // The same walk as RunPrefillTask in kernels/softmax/prefill.cc, recording instead of computing.
  for (const PrefillTask& t : plan.tasks) {
    const int64_t qb = t.q_begin / plan.block_q;
    g.task_order.push_back(qb);
    const int64_t rows = std::min(plan.block_q, Tq - t.q_begin);
    const int64_t q_first = t.q_begin + offset, q_last = t.q_begin + rows - 1 + offset;
    const KeyRange range = visible_key_range(mask, q_first, q_last, Tk, plan.block_k);
    for (int64_t k0 = range.begin; k0 < range.end; k0 += plan.block_k) {
      const int64_t cols = std::min(plan.block_k, Tk - k0);
      const TileClass cls = classify_tile(mask, q_first, q_last, k0, k0 + cols - 1);
      const TileVisit v = cls == TileClass::skipped ? TileVisit::skipped
                          : cls == TileClass::full  ? TileVisit::full
                                                    : TileVisit::partial;
      g.visits[size_t(qb * g.num_k_tiles + k0 / plan.block_k)] = v;
    }
  }
  return g;
}

}  // namespace attnzoo::explain
