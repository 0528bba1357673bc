// Chunkwise-parallel machinery shared by the scalar-decay (simple GLA, retention, linear attention) and the
// per-channel-decay (GLA) kernels. Compiled once per SIMD target; include inside the HWY_NAMESPACE users.
//
// For a chunk of c <= C tokens with log decays b_i accumulated from the chunk start (b_i <= 0), with state S
// entering the chunk:
//   O      = A V + (q_i * exp(b_i)) S                 A: causal intra-chunk scores, decays folded in
//   S_next = diag(exp(b_last)) S + sum_j (k_j * exp(b_last - b_j))^T v_j
// Every exponent here is <= 0, so no factor can overflow however strong the decay; only A needs care
// (the kernels build it). All products are tile GEMMs.
#if defined(ATTNZOO_GLA_CHUNK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_GLA_CHUNK_INL_H_
#undef ATTNZOO_GLA_CHUNK_INL_H_
#else
#define ATTNZOO_GLA_CHUNK_INL_H_
#endif

#include <algorithm>
#include <cmath>

#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "core/aligned_buffer.h"
#include "kernels/common/tile_gemm-inl.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_rows.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct GlaChunkScratch {
  AlignedBuffer<float> S;       // [K, Vp] state
  AlignedBuffer<float> Q;       // [C, K]  phi(q) * scale
  AlignedBuffer<float> Krows;   // [C, K]  phi(k)
  AlignedBuffer<float> Kt;      // [K, C]  phi(k) transposed, columns past the chunk zero
  AlignedBuffer<float> Vc;      // [C, Vp] values (and the normaliser's ones column)
  AlignedBuffer<float> A;       // [C, C]  intra-chunk scores
  AlignedBuffer<float> O;       // [C, Vp]
  AlignedBuffer<float> Qd;      // [C, K]  queries decayed to the chunk start
  AlignedBuffer<float> Kdt;     // [K, C]  keys decayed to the chunk end, transposed
  AlignedBuffer<float> B;       // [C, K] (channel) or [C] (scalar) cumulative log decay within the chunk
  AlignedBuffer<float> decay;   // [K] state decay across the whole chunk
  AlignedBuffer<float> tmp;     // scratch rows

  void reserve(size_t C, size_t K, size_t Vp) {
    S.resize(K * Vp);
    Q.resize(C * K);
    Krows.resize(C * K);
    Kt.resize(K * C);
    Vc.resize(C * Vp);
    A.resize(C * C);
    O.resize(C * Vp);
    Qd.resize(C * K);
    Kdt.resize(K * C);
    B.resize(C * K);
    decay.resize(K);
    tmp.resize(std::max({K, Vp, C}) + 16);
  }
};

// dst[i] = exp(src[i]) for n elements.
HWY_INLINE void ExpArray(const float* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Exp(d, hn::LoadU(d, src + i)), d, dst + i);
  for (; i < n; ++i) dst[i] = std::exp(src[i]);
}

// Loads the chunk's queries, keys (row-major and transposed) and values; rows past c are zero so that GEMMs
// over whole vectors of columns see no garbage.
HWY_INLINE void LoadChunkInputs(const GlaProblem& p, int64_t row0, int64_t hv, size_t c, size_t C, size_t Vp,
                                GlaChunkScratch& sc) {
  const size_t K = size_t(p.K);
  const int64_t h = hv / p.group();
  for (size_t i = 0; i < C; ++i) {
    float* qrow = sc.Q.data() + i * K;
    float* krow = sc.Krows.data() + i * K;
    float* vrow = sc.Vc.data() + i * Vp;
    if (i < c) {
      load_gla_query(p, row0 + int64_t(i), h, qrow);
      load_gla_key(p, row0 + int64_t(i), h, krow);
      load_gla_value(p, row0 + int64_t(i), hv, vrow, int64_t(Vp));
    } else {
      std::fill(qrow, qrow + K, 0.f);
      std::fill(krow, krow + K, 0.f);
      std::fill(vrow, vrow + Vp, 0.f);
    }
    for (size_t kk = 0; kk < K; ++kk) sc.Kt[kk * C + i] = krow[kk];
  }
}

// Asks for the next chunk's q, k, v rows while this chunk's GEMMs run: rows of one head sit H (or HV) rows
// apart in memory, a stride the hardware prefetchers follow poorly, and the loads otherwise stall on DRAM.
HWY_INLINE void PrefetchChunkInputs(const GlaProblem& p, int64_t row0, int64_t hv, size_t c) {
  const int64_t h = hv / p.group();
  const size_t qk_bytes = size_t(p.K) * dtype_size(p.q_dtype), v_bytes = size_t(p.V) * dtype_size(p.v_dtype);
  for (size_t i = 0; i < c; ++i) {
    const char* qrow = gla_element(p.q, p.q_dtype, ((row0 + int64_t(i)) * p.H + h) * p.K);
    const char* krow = gla_element(p.k, p.k_dtype, ((row0 + int64_t(i)) * p.H + h) * p.K);
    const char* vrow = gla_element(p.v, p.v_dtype, ((row0 + int64_t(i)) * p.HV + hv) * p.V);
    for (size_t b = 0; b < qk_bytes; b += 64) {
      hwy::Prefetch(qrow + b);
      hwy::Prefetch(krow + b);
    }
    for (size_t b = 0; b < v_bytes; b += 64) hwy::Prefetch(vrow + b);
  }
}

// O = A V (+ Qd S when the entering state may be non-zero), then the chunk's output rows are written.
HWY_INLINE void ChunkOutput(const GlaProblem& p, int64_t row0, int64_t hv, size_t c, size_t C, size_t Vp,
                            const float* Qd, bool state_nonzero, GlaChunkScratch& sc) {
  const size_t K = size_t(p.K);
  TileGemm(c, Vp, c, sc.A.data(), C, sc.Vc.data(), Vp, sc.O.data(), Vp, /*accumulate=*/false);
  if (state_nonzero) TileGemm(c, Vp, K, Qd, K, sc.S.data(), Vp, sc.O.data(), Vp, /*accumulate=*/true);
  for (size_t i = 0; i < c; ++i) store_gla_output(p, row0 + int64_t(i), hv, sc.O.data() + i * Vp);
}

// S = diag(decay) S + Kdt V, decay[K] being exp(b_last) per state row (null: no decay).
HWY_INLINE void ChunkStateUpdate(size_t K, size_t c, size_t C, size_t Vp, const float* decay, const float* Kdt,
                                 GlaChunkScratch& sc) {
  if (decay) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    for (size_t i = 0; i < K; ++i) {
      const auto a = hn::Set(d, decay[i]);
      float* row = sc.S.data() + i * Vp;
      for (size_t j = 0; j < Vp; j += L) hn::StoreU(hn::Mul(a, hn::LoadU(d, row + j)), d, row + j);
    }
  }
  TileGemm(K, Vp, c, Kdt, C, sc.Vc.data(), Vp, sc.S.data(), Vp, /*accumulate=*/true);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
