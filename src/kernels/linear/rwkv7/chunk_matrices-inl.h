// The intra-chunk matrices of chunked RWKV-7 (fla's chunk_dplr_delta_rule), per target. Include inside a
// per-target translation unit.
//
// Within a chunk (rows i, j; G_i the in-chunk cumulative log decay through token i, G_{-1} = 0, so G_{i-1} is
// the decay up to but excluding token i, which is what the low-rank read a_i^T S_{i-1} sees):
//   A_qk[i][j] = sum_c q_ic k_jc e^{G_ic - G_jc}       j <= i
//   A_qb[i][j] = sum_c q_ic b_jc e^{G_ic - G_jc}       j <= i
//   A_ak[i][j] = sum_c a_ic k_jc e^{G_(i-1)c - G_jc}   j <  i
//   A_ab[i][j] = sum_c a_ic b_jc e^{G_(i-1)c - G_jc}   j <  i
// With one decay per channel the exponential cannot be applied after the product, and e^{G_i} / e^{G_j} taken
// separately would underflow / overflow (w = -8 over 64 tokens is e^{-512}). So, as in our KDA chunk, rows are
// cut into 16-token sub-chunks. For the block of rows [r0, r0+16) against earlier columns j < r0, with reference
// R = G_{r0-1}, each entry is the GEMM of (q_i e^{G_i - R}) or (a_i e^{G_{i-1} - R}) with (k_j e^{R - G_j}) or
// (b_j e^{R - G_j}): every factor is exp of a difference taken towards the future, so it lies in [0, 1] when
// w <= 0 and can only underflow (where the true entry is even smaller). Inside the diagonal block the decay from j
// to i is built up by multiplying the per-token decays e^{w}, never exponentiating a growing difference.
#if defined(ATTNZOO_RWKV7_CHUNK_MATRICES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_RWKV7_CHUNK_MATRICES_INL_H_
#undef ATTNZOO_RWKV7_CHUNK_MATRICES_INL_H_
#else
#define ATTNZOO_RWKV7_CHUNK_MATRICES_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "kernels/common/tile_gemm-inl.h"
#include "kernels/linear/common/delta_rows-inl.h"
#include "kernels/linear/common/delta_wy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

// One task's buffers (reused head by head, except the states); rows padded to Kp / Vp floats, chunk rows to cp
// (multiples of 16).
struct Rwkv7ChunkScratch {
  AlignedBuffer<float> S;                      // [heads x K x Vp] the carried states of the task's heads
  AlignedBuffer<float> q, k, a, b;             // [cp x Kp]; q = scale * r
  AlignedBuffer<float> G, E;                   // [cp x Kp] cumulative log decay, per-token decay e^{w}
  AlignedBuffer<float> k_t, b_t, G_t;          // [K x cp] k, b, G transposed: right factors are built in place
  AlignedBuffer<float> Aqk, Aqb, Aak, Aab, T;  // [cp x cp]
  AlignedBuffer<float> WQ;                     // [2cp x Kp] rows: W = T (a e^{G_{i-1}}), then q e^{G_i}
  AlignedBuffer<float> VSO;                    // [3cp x Vp] rows: V, SA (the low-rank reads a_i^T S_{i-1}), O
  AlignedBuffer<float> P;                      // [cp x Vp] A_ak V
  AlignedBuffer<float> rows;                   // [cp x Kp] a e^{G_{i-1}}
  AlignedBuffer<float> right_t;                // [K x 2cp] transposed right factors
  AlignedBuffer<float> left;                   // [32 x Kp] left factors of one sub-chunk
  AlignedBuffer<float> block;                  // [32 x 2cp] their products with the right factors
  AlignedBuffer<float> ke, be;                 // [Kp]

  void resize(size_t C, size_t K, size_t Kp, size_t Vp) {
    for (auto* x : {&q, &k, &a, &b, &G, &E}) x->resize(C * Kp);
    for (auto* x : {&k_t, &b_t, &G_t}) x->resize(K * C);
    for (auto* x : {&Aqk, &Aqb, &Aak, &Aab, &T}) x->resize(C * C);
    WQ.resize(2 * C * Kp);
    VSO.resize(3 * C * Vp);
    P.resize(C * Vp);
    rows.resize(C * Kp);
    right_t.resize(K * 2 * C);
    left.resize(2 * kDeltaBlock * Kp);
    block.resize(2 * kDeltaBlock * 2 * C);
    ke.resize(Kp), be.resize(Kp);
  }
  // G_{i-1}: the decay accumulated before token i (zero for the chunk's first token, whose row G_{-1} is absent).
  const float* G_before(size_t i, size_t Kp) const { return i == 0 ? nullptr : G.data() + (i - 1) * Kp; }
};

// dst = x * exp(hi - lo) over n_padded floats; a null pointer stands for a zero row.
HWY_INLINE void Rwkv7MulExpDiff(float* HWY_RESTRICT dst, const float* x, const float* hi, const float* lo,
                                size_t n_padded) {
  const hn::ScalableTag<float> d;
  for (size_t i = 0; i < n_padded; i += hn::Lanes(d)) {
    auto e = hi ? hn::Load(d, hi + i) : hn::Zero(d);
    if (lo) e = hn::Sub(e, hn::Load(d, lo + i));
    hn::Store(hn::Mul(hn::Load(d, x + i), hn::Exp(d, e)), d, dst + i);
  }
}

// The right factors of a product against k and b, in the transposed [K x 2n] layout the tile GEMM wants:
// out[c][j] = k_t[c][j] e^{ref_c - G_t[c][j]}, out[c][n + j] = b_t[c][j] e^{ref_c - G_t[c][j]} for j < n (a
// multiple of 16). Built from transposed k, b, G directly, so no transpose per product.
HWY_INLINE void Rwkv7DecayedColumns(const Rwkv7ChunkScratch& sc, size_t cp, size_t K, size_t n, const float* ref,
                                    float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  for (size_t c = 0; c < K; ++c) {
    const auto r = hn::Set(d, ref[c]);
    const float* kc = sc.k_t.data() + c * cp;
    const float* bc = sc.b_t.data() + c * cp;
    const float* Gc = sc.G_t.data() + c * cp;
    float* o = out + c * 2 * n;
    for (size_t j = 0; j < n; j += hn::Lanes(d)) {
      const auto e = hn::Exp(d, hn::Sub(r, hn::Load(d, Gc + j)));
      hn::StoreU(hn::Mul(hn::Load(d, kc + j), e), d, o + j);
      hn::StoreU(hn::Mul(hn::Load(d, bc + j), e), d, o + n + j);
    }
  }
}

HWY_INLINE void Rwkv7MulInPlace(float* HWY_RESTRICT x, const float* HWY_RESTRICT y, size_t n_padded) {
  const hn::ScalableTag<float> d;
  for (size_t i = 0; i < n_padded; i += hn::Lanes(d))
    hn::Store(hn::Mul(hn::Load(d, x + i), hn::Load(d, y + i)), d, x + i);
}

// Fills rows [r0, r0+16) of the four matrices, columns [0, r0+16); entries right of the diagonal are zero.
HWY_INLINE void Rwkv7SubChunkMatrices(Rwkv7ChunkScratch& sc, size_t r0, size_t cp, size_t K, size_t Kp) {
  const float* q = sc.q.data();
  const float* k = sc.k.data();
  const float* a = sc.a.data();
  const float* b = sc.b.data();
  const float* G = sc.G.data();
  float* Aqk = sc.Aqk.data();
  float* Aqb = sc.Aqb.data();
  float* Aak = sc.Aak.data();
  float* Aab = sc.Aab.data();
  if (r0 > 0) {
    const float* R = G + (r0 - 1) * Kp;
    float* ql = sc.left.data();
    float* al = sc.left.data() + kDeltaBlock * Kp;
    for (size_t i = 0; i < kDeltaBlock; ++i) {
      Rwkv7MulExpDiff(ql + i * Kp, q + (r0 + i) * Kp, G + (r0 + i) * Kp, R, Kp);
      Rwkv7MulExpDiff(al + i * Kp, a + (r0 + i) * Kp, sc.G_before(r0 + i, Kp), R, Kp);
    }
    const size_t n = 2 * r0;
    float* rt = sc.right_t.data();
    Rwkv7DecayedColumns(sc, cp, K, r0, R, rt);
    // One [32 x 2r0] product (wider and taller tiles than four [16 x r0] ones), then spread into the matrices.
    float* blk = sc.block.data();
    TileGemm(2 * kDeltaBlock, n, K, ql, Kp, rt, n, blk, n, false);
    for (size_t i = 0; i < kDeltaBlock; ++i) {
      const float* top = blk + i * n;
      const float* bottom = blk + (kDeltaBlock + i) * n;
      std::memcpy(Aqk + (r0 + i) * cp, top, r0 * sizeof(float));
      std::memcpy(Aqb + (r0 + i) * cp, top + r0, r0 * sizeof(float));
      std::memcpy(Aak + (r0 + i) * cp, bottom, r0 * sizeof(float));
      std::memcpy(Aab + (r0 + i) * cp, bottom + r0, r0 * sizeof(float));
    }
  }
  for (size_t i = r0; i < r0 + kDeltaBlock; ++i)
    for (float* A : {Aqk, Aqb, Aak, Aab}) std::fill(A + i * cp + r0, A + i * cp + r0 + kDeltaBlock, 0.f);
  float* ke = sc.ke.data();
  float* be = sc.be.data();
  for (size_t j = r0; j < r0 + kDeltaBlock; ++j) {
    Aqk[j * cp + j] = DeltaDot(q + j * Kp, k + j * Kp, Kp);
    Aqb[j * cp + j] = DeltaDot(q + j * Kp, b + j * Kp, Kp);
    std::memcpy(ke, k + j * Kp, Kp * sizeof(float));
    std::memcpy(be, b + j * Kp, Kp * sizeof(float));
    for (size_t i = j + 1; i < r0 + kDeltaBlock; ++i) {
      // ke, be hold k_j, b_j decayed over (j, i-1]: what a_i reads; one more step gives what q_i reads.
      Aak[i * cp + j] = DeltaDot(a + i * Kp, ke, Kp);
      Aab[i * cp + j] = DeltaDot(a + i * Kp, be, Kp);
      Rwkv7MulInPlace(ke, sc.E.data() + i * Kp, Kp);
      Rwkv7MulInPlace(be, sc.E.data() + i * Kp, Kp);
      Aqk[i * cp + j] = DeltaDot(q + i * Kp, ke, Kp);
      Aqb[i * cp + j] = DeltaDot(q + i * Kp, be, Kp);
    }
  }
}

// All four matrices of a chunk of cp rows, then T = (I - A_ab)^-1 (forward substitution).
HWY_INLINE void Rwkv7ChunkMatrices(Rwkv7ChunkScratch& sc, size_t cp, size_t K, size_t Kp) {
  DeltaTranspose(sc.k.data(), Kp, cp, K, sc.k_t.data(), cp);
  DeltaTranspose(sc.b.data(), Kp, cp, K, sc.b_t.data(), cp);
  DeltaTranspose(sc.G.data(), Kp, cp, K, sc.G_t.data(), cp);
  for (size_t r0 = 0; r0 < cp; r0 += kDeltaBlock) Rwkv7SubChunkMatrices(sc, r0, cp, K, Kp);
  // DeltaUnitLowerInverse inverts I + A; the DPLR recurrence needs I - A_ab (SA = A_ab SA + ...).
  float* Aab = sc.Aab.data();
  for (size_t i = 0; i < cp; ++i)
    for (size_t j = 0; j < i; ++j) Aab[i * cp + j] = -Aab[i * cp + j];
  DeltaUnitLowerInverse(Aab, cp, sc.T.data());
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
