// RetNet's parallel form: O = (Q K^T * D) V with D[i, j] = gamma^(i - j) for j <= i, else 0 — quadratic in
// the sequence length, no state. Tiles of 64 queries x 64 keys; one task per (sequence, value head, query tile).
// gamma^(i - j) is taken as exp((i - j) log gamma) from the integer distance, so it stays exact for long
// sequences (a running sum of log gamma would lose precision).
#include <algorithm>
#include <vector>

#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/common/gla_problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/retention/parallel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/gla_chunk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

constexpr size_t kTile = 64;

void RunParallelRetentionTask(const GlaProblem& p, const std::vector<int64_t>& task_seq,
                              const std::vector<int64_t>& task_tile, int64_t task) {
  static thread_local GlaChunkScratch sc;
  static thread_local GlaChunkScratch keys;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t n = task_seq[size_t(task)] / p.HV, hv = task_seq[size_t(task)] % p.HV;
  const int64_t q0 = task_tile[size_t(task)] * int64_t(kTile);
  const size_t K = size_t(p.K), Vp = size_t(gla_padded_width(p));
  const float lg = p.g_gamma ? p.g_gamma[hv] : 0.f;
  const int64_t len = p.seqs.length[size_t(n)], base = p.seqs.begin[size_t(n)];
  sc.reserve(kTile, K, Vp);
  keys.reserve(kTile, K, Vp);
  const size_t rows = size_t(std::min<int64_t>(int64_t(kTile), len - q0));
  LoadChunkInputs(p, base + q0, hv, rows, kTile, Vp, sc);  // only Q is used from this tile
  std::fill(sc.O.data(), sc.O.data() + kTile * Vp, 0.f);
  for (int64_t k0 = 0; k0 <= q0; k0 += int64_t(kTile)) {
    const size_t cols = size_t(std::min<int64_t>(int64_t(kTile), len - k0));
    LoadChunkInputs(p, base + k0, hv, cols, kTile, Vp, keys);
    TileGemm(rows, kTile, K, sc.Q.data(), K, keys.Kt.data(), kTile, sc.A.data(), kTile, /*accumulate=*/false);
    for (size_t i = 0; i < rows; ++i) {
      float* arow = sc.A.data() + i * kTile;
      const int64_t qi = q0 + int64_t(i);
      for (size_t j = 0; j < kTile; j += L) {
        // distance i - j per lane; lanes with j > i (or past the sequence) are zeroed
        alignas(64) float dist[16];
        for (size_t l = 0; l < L; ++l) dist[l] = float(qi - (k0 + int64_t(j + l)));
        const auto dv = hn::Load(d, dist);
        const auto keep = hn::Ge(dv, hn::Zero(d));
        const auto decay = hn::Exp(d, hn::Mul(hn::Set(d, lg), hn::Max(dv, hn::Zero(d))));
        hn::StoreU(hn::IfThenElseZero(keep, hn::Mul(hn::LoadU(d, arow + j), decay)), d, arow + j);
      }
    }
    TileGemm(rows, Vp, cols, sc.A.data(), kTile, keys.Vc.data(), Vp, sc.O.data(), Vp, /*accumulate=*/true);
  }
  for (size_t i = 0; i < rows; ++i) store_gla_output(p, base + q0 + int64_t(i), hv, sc.O.data() + i * Vp);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunParallelRetentionTask);

void gated_linear_parallel_constant_decay(const GlaProblem& p) {
  active_target();
  std::vector<int64_t> task_seq, task_tile;
  for (int64_t n = 0; n < p.seqs.count(); ++n)
    for (int64_t hv = 0; hv < p.HV; ++hv)
      for (int64_t t = 0; t * 64 < p.seqs.length[size_t(n)]; ++t) {
        task_seq.push_back(n * p.HV + hv);
        task_tile.push_back(t);
      }
  ThreadPool::global().parallel_for(int64_t(task_seq.size()), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunParallelRetentionTask)(p, task_seq, task_tile, task);
  });
}

}  // namespace attnzoo
#endif
