// Chunkwise-parallel prefill for a scalar decay per (token, head): simple GLA, and through it RetNet retention
// (constant decay) and linear attention (no decay). A scalar decay factors out of the key contraction, so the
// intra-chunk scores are one GEMM, Q K^T, scaled elementwise by exp(b_i - b_j) <= 1 below the diagonal.
// One task per (sequence, value head); the state stays in scratch across the sequence's chunks.
#include <algorithm>

#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/common/gla_problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/simple_gla/chunk.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/gla_chunk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

// A[i, j] *= exp(b_i - b_j) for j <= i, A[i, j] = 0 above the diagonal (b null: no decay, only the mask).
HWY_INLINE void DecayAndMaskScores(float* HWY_RESTRICT A, size_t c, size_t C, const float* HWY_RESTRICT b) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  for (size_t i = 0; i < c; ++i) {
    float* row = A + i * C;
    const auto bi = hn::Set(d, b ? b[i] : 0.f);
    for (size_t j = 0; j < C; j += L) {
      if (j > i) {
        hn::StoreU(hn::Zero(d), d, row + j);
        continue;
      }
      const auto keep = hn::FirstN(d, i + 1 - j);
      auto s = hn::LoadU(d, row + j);
      if (b) s = hn::Mul(s, hn::Exp(d, hn::Sub(bi, hn::LoadU(d, b + j))));
      hn::StoreU(hn::IfThenElseZero(keep, s), d, row + j);
    }
  }
}

void RunScalarDecayChunkTask(const GlaProblem& p, int64_t task) {
  static thread_local GlaChunkScratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t n = task / p.HV, hv = task % p.HV;
  const size_t K = size_t(p.K), C = size_t(p.chunk_size), Vp = size_t(gla_padded_width(p));
  const bool gated = p.gate == GateKind::scalar;
  sc.reserve(C, K, Vp);
  load_gla_state(p, n, hv, sc.S.data(), int64_t(Vp));
  bool state_nonzero = p.initial_state || (p.normalize && p.initial_z);
  const int64_t len = p.seqs.length[size_t(n)];
  float* b = sc.B.data();
  for (int64_t t0 = 0; t0 < len; t0 += int64_t(C)) {
    const int64_t row0 = p.seqs.begin[size_t(n)] + t0;
    const size_t c = size_t(std::min<int64_t>(int64_t(C), len - t0));
    LoadChunkInputs(p, row0, hv, c, C, Vp, sc);
    if (t0 + int64_t(C) < len)
      PrefetchChunkInputs(p, row0 + int64_t(C), hv, size_t(std::min<int64_t>(int64_t(C), len - t0 - int64_t(C))));
    if (gated) {
      float acc = 0.f;
      for (size_t i = 0; i < c; ++i) b[i] = acc += gla_scalar_gate(p, row0 + int64_t(i), hv);
      for (size_t i = c; i < C; ++i) b[i] = acc;
    }
    TileGemm(c, C, K, sc.Q.data(), K, sc.Kt.data(), C, sc.A.data(), C, /*accumulate=*/false);
    DecayAndMaskScores(sc.A.data(), c, C, gated ? b : nullptr);

    const float* Qd = sc.Q.data();
    if (gated && state_nonzero) {
      ExpArray(b, sc.tmp.data(), c);
      for (size_t i = 0; i < c; ++i) {
        const auto e = hn::Set(d, sc.tmp[i]);
        const float* src = sc.Q.data() + i * K;
        float* dst = sc.Qd.data() + i * K;
        size_t kk = 0;
        for (; kk + L <= K; kk += L) hn::StoreU(hn::Mul(e, hn::LoadU(d, src + kk)), d, dst + kk);
        for (; kk < K; ++kk) dst[kk] = sc.tmp[i] * src[kk];
      }
      Qd = sc.Qd.data();
    }
    ChunkOutput(p, row0, hv, c, C, Vp, Qd, state_nonzero, sc);

    const float* Kdt = sc.Kt.data();
    const float* decay = nullptr;
    if (gated) {
      const float last = b[c - 1];
      for (size_t j = 0; j < C; ++j) sc.tmp[j] = last - b[j];
      ExpArray(sc.tmp.data(), sc.tmp.data(), C);
      for (size_t kk = 0; kk < K; ++kk) {
        const float* src = sc.Kt.data() + kk * C;
        float* dst = sc.Kdt.data() + kk * C;
        for (size_t j = 0; j < C; j += L)
          hn::StoreU(hn::Mul(hn::LoadU(d, src + j), hn::LoadU(d, sc.tmp.data() + j)), d, dst + j);
      }
      std::fill(sc.decay.data(), sc.decay.data() + K, std::exp(last));
      Kdt = sc.Kdt.data();
      decay = sc.decay.data();
    }
    ChunkStateUpdate(K, c, C, Vp, state_nonzero ? decay : nullptr, Kdt, sc);
    state_nonzero = true;
  }
  store_gla_state(p, n, hv, sc.S.data(), int64_t(Vp));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunScalarDecayChunkTask);

void gated_linear_chunk_scalar_decay(const GlaProblem& p) {
  active_target();
  ThreadPool::global().parallel_for(p.num_tasks(), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunScalarDecayChunkTask)(p, task);
  });
}

}  // namespace attnzoo
#endif
