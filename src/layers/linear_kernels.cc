// Per-target kernels behind Linear: the decode GEMV (weights streamed once, widened from bf16 in registers) and
// the tile-GEMM panel used when the tile backend is chosen for prefill.
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "layers/linear_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/linear_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/common/tile_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

template <class T>
HWY_INLINE VF LoadWeights(DF df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    const hn::Rebind<T, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, p));
  }
}

HWY_INLINE float Widen(float x) { return x; }
HWY_INLINE float Widen(hwy::bfloat16_t x) { return hwy::F32FromBF16(x); }

// How far ahead of its loads the GEMV asks for weights, into L2. The rows are one contiguous stream, yet the
// hardware prefetchers alone left the GEMV reading it at ~55% of a plain read of the same bytes (Emerald Rapids;
// a plain read issues one load per line, the GEMV a load, a widening, an x load and an FMA per 32 bytes, so fewer
// lines are in flight). Measured on that CPU, bf16, K = 1024 and 3072, one thread: 2 KiB ahead 72%, 4 KiB 87-90%,
// 4-16 KiB a plateau at 88-92%; into L1 (T0) instead of L2, 81-83%. 8 KiB sits in the middle of the plateau.
constexpr size_t kPrefetchBytes = 8192;

// Into L2 (x86 PREFETCHT1; GCC and Clang map locality 2 to it), read-only.
HWY_INLINE void PrefetchWeights(const void* p) { __builtin_prefetch(p, 0, 2); }

// Rows [n0, n1) of W dotted with kT token rows of x. Each weight vector is loaded once and used for every token,
// so memory traffic is one pass over the rows whatever T is (T <= 8).
template <class T, size_t kT>
HWY_INLINE void GemvRowsT(const T* HWY_RESTRICT w, size_t K, const float* HWY_RESTRICT x, size_t n0, size_t n1,
                          const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, size_t ldy) {
  const DF df;
  const size_t L = hn::Lanes(df);
  // kA accumulators per token, alternating vectors: with one, each FMA would wait on the previous one (4
  // cycles per vector, slower than memory for T = 1).
  constexpr size_t kA = kT == 1 ? 4 : kT == 2 ? 2 : 1;
  // One prefetch per 64-byte line of the step's weights (at least one per step). Rows are adjacent, so the
  // prefetch runs on into the next rows, and past the task's last row into the next task's (harmless: a
  // prefetch never faults).
  const size_t step_bytes = kA * L * sizeof(T);
  for (size_t n = n0; n < n1; ++n) {
    const T* HWY_RESTRICT row = w + n * K;
    VF acc[kT][kA];
    for (size_t t = 0; t < kT; ++t)
      for (size_t a = 0; a < kA; ++a) acc[t][a] = hn::Zero(df);
    size_t k = 0;
    for (; k + kA * L <= K; k += kA * L) {
      const char* ahead = reinterpret_cast<const char*>(row + k) + kPrefetchBytes;
      for (size_t b = 0; b < step_bytes; b += 64) PrefetchWeights(ahead + b);
      for (size_t a = 0; a < kA; ++a) {
        const VF wv = LoadWeights(df, row + k + a * L);
        for (size_t t = 0; t < kT; ++t) acc[t][a] = hn::MulAdd(wv, hn::LoadU(df, x + t * K + k + a * L), acc[t][a]);
      }
    }
    for (; k + L <= K; k += L) {
      const VF wv = LoadWeights(df, row + k);
      for (size_t t = 0; t < kT; ++t) acc[t][0] = hn::MulAdd(wv, hn::LoadU(df, x + t * K + k), acc[t][0]);
    }
    for (size_t t = 0; t < kT; ++t) {
      for (size_t a = 1; a < kA; ++a) acc[t][0] = hn::Add(acc[t][0], acc[t][a]);
      float s = hn::GetLane(hn::SumOfLanes(df, acc[t][0]));
      for (size_t kk = k; kk < K; ++kk) s += Widen(row[kk]) * x[t * K + kk];
      y[t * ldy + n] = s + (bias ? bias[n] : 0.f);
    }
  }
}

template <class T>
void GemvRowsTyped(const T* w, size_t K, const float* x, size_t T_, size_t n0, size_t n1, const float* bias, float* y,
                   size_t ldy) {
  switch (T_) {
    case 1: return GemvRowsT<T, 1>(w, K, x, n0, n1, bias, y, ldy);
    case 2: return GemvRowsT<T, 2>(w, K, x, n0, n1, bias, y, ldy);
    case 3: return GemvRowsT<T, 3>(w, K, x, n0, n1, bias, y, ldy);
    case 4: return GemvRowsT<T, 4>(w, K, x, n0, n1, bias, y, ldy);
    case 5: return GemvRowsT<T, 5>(w, K, x, n0, n1, bias, y, ldy);
    case 6: return GemvRowsT<T, 6>(w, K, x, n0, n1, bias, y, ldy);
    case 7: return GemvRowsT<T, 7>(w, K, x, n0, n1, bias, y, ldy);
    default: return GemvRowsT<T, 8>(w, K, x, n0, n1, bias, y, ldy);
  }
}

void GemvRows(const GemvTask& g) {
  if (g.w_dtype == DType::bf16)
    GemvRowsTyped(static_cast<const hwy::bfloat16_t*>(g.w), g.K, g.x, g.T, g.n0, g.n1, g.bias, g.y, g.ldy);
  else
    GemvRowsTyped(static_cast<const float*>(g.w), g.K, g.x, g.T, g.n0, g.n1, g.bias, g.y, g.ldy);
}

// The tile GEMM wants B = W^T row-major [K, nb] with nb a multiple of the vector length: the panel is packed
// transposed (widening bf16 on the way), the product lands in a scratch tile and is copied out with the bias.
void TileGemmPanel(const GemmPanelTask& g) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t nb = g.n1 - g.n0;
  const size_t nbp = (nb + L - 1) / L * L;
  thread_local AlignedBuffer<float> bt, c;
  bt.resize(g.K * nbp);
  for (size_t k = 0; k < g.K; ++k)
    for (size_t j = nb; j < nbp; ++j) bt[k * nbp + j] = 0.f;
  for (size_t j = 0; j < nb; ++j) {
    const size_t n = g.n0 + j;
    if (g.w_dtype == DType::bf16) {
      const uint16_t* row = static_cast<const uint16_t*>(g.w) + n * g.K;
      for (size_t k = 0; k < g.K; ++k) bt[k * nbp + j] = bf16_to_f32(row[k]);
    } else {
      const float* row = static_cast<const float*>(g.w) + n * g.K;
      for (size_t k = 0; k < g.K; ++k) bt[k * nbp + j] = row[k];
    }
  }
  constexpr size_t kRowBlock = 192;
  c.resize(kRowBlock * nbp);
  for (size_t m0 = 0; m0 < g.M; m0 += kRowBlock) {
    const size_t mb = HWY_MIN(kRowBlock, g.M - m0);
    TileGemm(mb, nbp, g.K, g.x + m0 * g.K, g.K, bt.data(), nbp, c.data(), nbp, false);
    for (size_t m = 0; m < mb; ++m) {
      float* dst = g.y + (m0 + m) * g.ldy + g.n0;
      for (size_t j = 0; j < nb; ++j) dst[j] = c[m * nbp + j] + (g.bias ? g.bias[g.n0 + j] : 0.f);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(GemvRows);
HWY_EXPORT(TileGemmPanel);

void gemv_rows(const GemvTask& task) { HWY_DYNAMIC_DISPATCH(GemvRows)(task); }
void tile_gemm_panel(const GemmPanelTask& task) { HWY_DYNAMIC_DISPATCH(TileGemmPanel)(task); }

}  // namespace attnzoo
#endif
