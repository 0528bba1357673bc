// Chunkwise-parallel prefill for GLA: a decay per key channel, g [B, T, HV, K]. The decay no longer factors
// out of the key contraction, so the intra-chunk scores A[i, j] = sum_k q_ik k_jk exp(b_ik - b_jk) are built
// in 16-token sub-chunks (fla's scheme):
//  - blocks below the diagonal factor through a reference point r, the last token before the query sub-chunk:
//    (q_i exp(b_i - b_r)) . (k_j exp(b_r - b_j)). For i >= r >= j both exponents are <= 0, so neither factor
//    can overflow even at g = -8 per step; a factor that underflows stands for a product that is smaller still.
//  - diagonal blocks take exp(b_i - b_j) per element (exponent <= 0 again).
// Inter-chunk terms and the state update use decays relative to the chunk start / end (gla_chunk-inl.h).
#include <algorithm>

#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/common/gla_problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/gla/chunk.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/gla_chunk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

constexpr size_t kSubChunk = 16;

// dst[0, K) = src[0, K) * exp(a[0, K) - b[0, K)).
HWY_INLINE void ScaleByExpDiff(const float* HWY_RESTRICT src, const float* HWY_RESTRICT a,
                               const float* HWY_RESTRICT b, float* HWY_RESTRICT dst, size_t K) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t k = 0;
  for (; k + L <= K; k += L)
    hn::StoreU(hn::Mul(hn::LoadU(d, src + k), hn::Exp(d, hn::Sub(hn::LoadU(d, a + k), hn::LoadU(d, b + k)))), d,
               dst + k);
  for (; k < K; ++k) dst[k] = src[k] * std::exp(a[k] - b[k]);
}

// sum_k q_k key_k exp(bq_k - bk_k).
HWY_INLINE float DecayedDot(const float* HWY_RESTRICT q, const float* HWY_RESTRICT key, const float* HWY_RESTRICT bq,
                            const float* HWY_RESTRICT bk, size_t K) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto acc = hn::Zero(d);
  size_t k = 0;
  for (; k + L <= K; k += L) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, bq + k), hn::LoadU(d, bk + k)));
    acc = hn::MulAdd(hn::Mul(hn::LoadU(d, q + k), hn::LoadU(d, key + k)), e, acc);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; k < K; ++k) sum += q[k] * key[k] * std::exp(bq[k] - bk[k]);
  return sum;
}

// Fills A [c, C] (row stride C) with the causal, decayed intra-chunk scores. Uses Qd and Kdt as scratch.
HWY_INLINE void ChannelDecayScores(size_t c, size_t C, size_t K, GlaChunkScratch& sc) {
  const float* B = sc.B.data();
  float* row_tmp = sc.tmp.data();
  for (size_t i0 = 0; i0 < c; i0 += kSubChunk) {
    const size_t rows = std::min(kSubChunk, c - i0);
    if (i0 > 0) {
      const float* ref = B + (i0 - 1) * K;
      float* Qt = sc.Qd.data() + i0 * K;
      for (size_t i = 0; i < rows; ++i) ScaleByExpDiff(sc.Q.data() + (i0 + i) * K, B + (i0 + i) * K, ref, Qt + i * K, K);
      for (size_t j = 0; j < i0; ++j) {
        ScaleByExpDiff(sc.Krows.data() + j * K, ref, B + j * K, row_tmp, K);
        for (size_t k = 0; k < K; ++k) sc.Kdt[k * C + j] = row_tmp[k];
      }
      TileGemm(rows, i0, K, Qt, K, sc.Kdt.data(), C, sc.A.data() + i0 * C, C, /*accumulate=*/false);
    }
    for (size_t i = i0; i < i0 + rows; ++i) {
      float* arow = sc.A.data() + i * C;
      for (size_t j = i0; j <= i; ++j)
        arow[j] = DecayedDot(sc.Q.data() + i * K, sc.Krows.data() + j * K, B + i * K, B + j * K, K);
      std::fill(arow + i + 1, arow + C, 0.f);
    }
  }
}

void RunChannelDecayChunkTask(const GlaProblem& p, int64_t task) {
  static thread_local GlaChunkScratch sc;
  const int64_t n = task / p.HV, hv = task % p.HV;
  const size_t K = size_t(p.K), C = size_t(p.chunk_size), Vp = size_t(gla_padded_width(p));
  sc.reserve(C, K, Vp);
  load_gla_state(p, n, hv, sc.S.data(), int64_t(Vp));
  bool state_nonzero = p.initial_state != nullptr;
  const int64_t len = p.seqs.length[size_t(n)];
  float* B = sc.B.data();
  for (int64_t t0 = 0; t0 < len; t0 += int64_t(C)) {
    const int64_t row0 = p.seqs.begin[size_t(n)] + t0;
    const size_t c = size_t(std::min<int64_t>(int64_t(C), len - t0));
    LoadChunkInputs(p, row0, hv, c, C, Vp, sc);
    if (t0 + int64_t(C) < len)
      PrefetchChunkInputs(p, row0 + int64_t(C), hv, size_t(std::min<int64_t>(int64_t(C), len - t0 - int64_t(C))));
    for (size_t i = 0; i < c; ++i) {
      load_gla_channel_gate(p, row0 + int64_t(i), hv, B + i * K);
      if (i > 0)
        for (size_t k = 0; k < K; ++k) B[i * K + k] += B[(i - 1) * K + k];
    }
    for (size_t i = c; i < C; ++i) std::copy_n(B + (c - 1) * K, K, B + i * K);

    ChannelDecayScores(c, C, K, sc);
    if (state_nonzero) {
      std::fill(sc.tmp.data(), sc.tmp.data() + K, 0.f);
      for (size_t i = 0; i < c; ++i) ScaleByExpDiff(sc.Q.data() + i * K, B + i * K, sc.tmp.data(), sc.Qd.data() + i * K, K);
    }
    ChunkOutput(p, row0, hv, c, C, Vp, sc.Qd.data(), state_nonzero, sc);

    // Keys decayed to the chunk end; columns past c hold zero keys.
    const float* last = B + (c - 1) * K;
    for (size_t j = 0; j < C; ++j) {
      ScaleByExpDiff(sc.Krows.data() + j * K, last, B + j * K, sc.tmp.data(), K);
      for (size_t k = 0; k < K; ++k) sc.Kdt[k * C + j] = sc.tmp[k];
    }
    ExpArray(last, sc.decay.data(), K);
    ChunkStateUpdate(K, c, C, Vp, state_nonzero ? sc.decay.data() : nullptr, sc.Kdt.data(), sc);
    state_nonzero = true;
  }
  store_gla_state(p, n, hv, sc.S.data(), int64_t(Vp));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunChannelDecayChunkTask);

void gated_linear_chunk_channel_decay(const GlaProblem& p) {
  active_target();
  ThreadPool::global().parallel_for(p.num_tasks(), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunChannelDecayChunkTask)(p, task);
  });
}

}  // namespace attnzoo
#endif
