// The f32-activation rows of quant_gemv_f32: each block is decoded in registers (bytes -> int32 lanes -> f32,
// never stored) and multiplied with the f32 activations by FMAs, kT tokens per decoded vector. Per sub-block of
// S elements with w_k = scale * q_k + offset:
//   sum_k w_k x_k = scale * (sum_k q_k x_k) + offset * (sum_k x_k),
// the first an FMA chain over the sub-block then one FMA into the row's accumulator, the second a scalar term
// from the activation sums per 16 (computed once per call, QuantGemvTask::xsum16). Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K and Q6_K have register decoders; Q2_K, Q3_K, MXFP4, IQ4_NL and IQ4_XS unpack each block into a 512-byte
// stack array (gemv_unpack-inl.h) first; F32 / F16 / BF16 rows are widened whole and dotted.
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/gemv_f32.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/quant/gemv_unpack-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes, so that a vector never crosses a sub-block of 16 or a half of a nibble-packed block.
using DF = hn::CappedTag<float, 16>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// Bytes [p, p + lanes) widened to int32 lanes.
HWY_INLINE VI LoadU8(const uint8_t* p) { return hn::PromoteTo(DI(), hn::LoadU(hn::Rebind<uint8_t, DF>(), p)); }
// Element e (a multiple of the lane count) of 32 nibble-packed values: e < 16 low nibbles of p[e...], else high
// nibbles of p[e - 16...].
HWY_INLINE VI Nibbles32(const uint8_t* p, size_t e) {
  return e < 16 ? hn::And(LoadU8(p + e), hn::Set(DI(), 0xF)) : hn::ShiftRight<4>(LoadU8(p + e - 16));
}
// Bit (first + lane) of `bits`, moved to bit 4.
HWY_INLINE VI HighBit(uint32_t bits, size_t first) {
  const hn::RebindToUnsigned<DI> du;
  const auto b = hn::And(hn::Shr(hn::Set(du, bits), hn::Iota(du, uint32_t(first))), hn::Set(du, 1u));
  return hn::BitCast(DI(), hn::ShiftLeft<4>(b));
}

// Decoders: Begin(block) fills the scales (and offsets) of the block's sub-blocks; Q(block, e) returns the
// integer values of elements [e, e + lanes) of the block as f32.
struct Q4_0F {
  static constexpr int S = 32, kBlock = 32, kBytes = 18;
  static constexpr bool kOffset = false;
  float sc[1], off[1];
  HWY_INLINE void Begin(const uint8_t* b) { sc[0] = Half(b); }
  HWY_INLINE VF Q(const uint8_t* b, size_t e) const {
    return hn::ConvertTo(DF(), hn::Sub(Nibbles32(b + 2, e), hn::Set(DI(), 8)));
  }
};

struct Q4_1F {
  static constexpr int S = 32, kBlock = 32, kBytes = 20;
  static constexpr bool kOffset = true;
  float sc[1], off[1];
  HWY_INLINE void Begin(const uint8_t* b) {
    sc[0] = Half(b);
    off[0] = Half(b + 2);
  }
  HWY_INLINE VF Q(const uint8_t* b, size_t e) const { return hn::ConvertTo(DF(), Nibbles32(b + 4, e)); }
};

template <bool kMin>
struct Q5F {  // Q5_0 and Q5_1: bit e of the 32-bit qh is element e's fifth bit
  static constexpr int S = 32, kBlock = 32, kBytes = kMin ? 24 : 22;
  static constexpr bool kOffset = kMin;
  float sc[1], off[1];
  uint32_t qh;
  HWY_INLINE void Begin(const uint8_t* b) {
    sc[0] = Half(b);
    if (kMin) off[0] = Half(b + 2);
    qh = load_u32(b + (kMin ? 4 : 2));
  }
  HWY_INLINE VF Q(const uint8_t* b, size_t e) const {
    const VI v = hn::Or(Nibbles32(b + (kMin ? 8 : 6), e), HighBit(qh, e));
    return hn::ConvertTo(DF(), kMin ? v : hn::Sub(v, hn::Set(DI(), 16)));
  }
};

struct Q8_0F {
  static constexpr int S = 32, kBlock = 32, kBytes = 34;
  static constexpr bool kOffset = false;
  float sc[1], off[1];
  HWY_INLINE void Begin(const uint8_t* b) { sc[0] = Half(b); }
  HWY_INLINE VF Q(const uint8_t* b, size_t e) const {
    const hn::Rebind<int8_t, DF> d8;
    return hn::ConvertTo(DF(), hn::PromoteTo(DI(), hn::LoadU(d8, reinterpret_cast<const int8_t*>(b + 2) + e)));
  }
};

template <bool kFive>
struct QKF {  // Q4_K and Q5_K: sub-block j is the low (j even) or high nibbles of qs[32 (j / 2)...], + bit j of qh
  static constexpr int S = 32, kBlock = 256, kBytes = kFive ? 176 : 144;
  static constexpr bool kOffset = true;
  float sc[8], off[8];
  HWY_INLINE void Begin(const uint8_t* b) {
    const float d = Half(b), dmin = Half(b + 2);
    for (int j = 0; j < 8; ++j) {
      const KScaleMin sm = k_scale_min(b + 4, j);
      sc[j] = d * float(sm.scale);
      off[j] = -(dmin * float(sm.min));
    }
  }
  HWY_INLINE VF Q(const uint8_t* b, size_t e) const {
    const size_t j = e / 32, l = e % 32;
    const VI v = LoadU8(b + (kFive ? 48 : 16) + 32 * (j / 2) + l);
    VI q = j % 2 ? hn::ShiftRight<4>(v) : hn::And(v, hn::Set(DI(), 0xF));
    if (kFive) q = hn::Or(q, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(LoadU8(b + 16 + l), int(j)), hn::Set(DI(), 1))));
    return hn::ConvertTo(DF(), q);
  }
};

struct Q6_KF {  // element 128 h + m (m < 64): low nibble of ql[64 h + m]; 128 h + 64 + m: its high nibble; the top
                // two bits from qh[32 h + m % 32] at bit 2 (m / 32) (+ 4 for the high nibble)
  static constexpr int S = 16, kBlock = 256, kBytes = 210;
  static constexpr bool kOffset = false;
  float sc[16], off[1];
  HWY_INLINE void Begin(const uint8_t* b) {
    const float d = Half(b + 208);
    for (int s = 0; s < 16; ++s) sc[s] = d * float(int8_t(b[192 + s]));
  }
  HWY_INLINE VF Q(const uint8_t* b, size_t e) const {
    const size_t h = e / 128, r = e % 128, m = r % 64;
    const bool high = r >= 64;
    const VI l4 = LoadU8(b + 64 * h + m);
    const VI lo = high ? hn::ShiftRight<4>(l4) : hn::And(l4, hn::Set(DI(), 0xF));
    const int shift = int(2 * (m / 32) + (high ? 4 : 0));
    const VI hi = hn::And(hn::ShiftRightSame(LoadU8(b + 128 + 32 * h + m % 32), shift), hn::Set(DI(), 3));
    return hn::ConvertTo(DF(), hn::Sub(hn::Or(lo, hn::ShiftLeft<4>(hi)), hn::Set(DI(), 32)));
  }
};

// The other block formats through their int16 unpacking.
template <class U>
struct UnpackedF {
  static constexpr int S = U::S, kBlock = U::kBlock, kBytes = U::kBytes;
  static constexpr bool kOffset = U::kOffset;
  float sc[kBlock / S], off[kBlock / S];
  HWY_ALIGN int16_t q[kBlock];
  HWY_INLINE void Begin(const uint8_t* b) { U::Unpack(b, q, sc, off); }
  HWY_INLINE VF Q(const uint8_t*, size_t e) const {
    return hn::ConvertTo(DF(), hn::PromoteTo(DI(), hn::LoadU(hn::Rebind<int16_t, DF>(), q + e)));
  }
};

// One row against kT tokens: x [kT, K] rows K apart, xsum16 [kT, K / 16] rows K / 16 apart.
template <class F, size_t kT>
HWY_INLINE void RowF32(const uint8_t* HWY_RESTRICT row, size_t K, const float* HWY_RESTRICT x,
                       const float* HWY_RESTRICT xsum16, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  constexpr size_t kSub = F::kBlock / F::S;
  // Two accumulators per token, alternating sub-blocks (and blocks): one chain per token would wait on itself.
  VF acc[kT][2];
  float osum[kT] = {};
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = hn::Zero(df);
  F f;
  // Blocks go in pairs so that the accumulator of each sub-block is known at compile time and a block of one
  // sub-block (Q4_0, Q8_0, ...) alternates with the next: one chain would wait 4 cycles per block.
  // The accumulator choice must be a compile-time constant (kA0), and the lambda inlined: with a run-time index
  // GCC keeps acc in memory and every block waits on a store and a reload.
  auto block = [&]<size_t kA0>(size_t ib) HWY_ATTR __attribute__((always_inline)) {
    const uint8_t* b = row + ib * F::kBytes;
    f.Begin(b);
    // Unrolled so that every sub-block's decode (nibble half, shifts) is fixed at compile time.
#pragma GCC unroll 16
    for (size_t j = 0; j < kSub; ++j) {
      const size_t k0 = ib * F::kBlock + j * F::S;
      VF s[kT];
      for (size_t t = 0; t < kT; ++t) s[t] = hn::Zero(df);
#pragma GCC unroll 4
      for (size_t e = 0; e < size_t(F::S); e += L) {
        const VF q = f.Q(b, j * F::S + e);
        for (size_t t = 0; t < kT; ++t) {
          s[t] = hn::MulAdd(q, hn::LoadU(df, x + t * K + k0 + e), s[t]);
        }
      }
      for (size_t t = 0; t < kT; ++t) acc[t][(kA0 + j) % 2] = hn::MulAdd(s[t], hn::Set(df, f.sc[j]), acc[t][(kA0 + j) % 2]);
      if (F::kOffset)
        for (size_t t = 0; t < kT; ++t) {
          const float* xs = xsum16 + t * (K / 16) + k0 / 16;
          osum[t] += f.off[j] * (F::S == 32 ? xs[0] + xs[1] : xs[0]);
        }
    }
  };
  const size_t nb = K / F::kBlock;
  size_t ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    block.template operator()<0>(ib);
    block.template operator()<kSub % 2>(ib + 1);
  }
  if (ib < nb) block.template operator()<0>(ib);
  for (size_t t = 0; t < kT; ++t) out[t] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc[t][0], acc[t][1]))) + osum[t];
}

template <class F>
void RowsF32Typed(const QuantGemvTask& g) {
  const size_t K = size_t(g.w.cols);
  for_rows_by_4_tokens(g, [&](size_t n, size_t t0, size_t tokens, float* out) {
    const uint8_t* row = g.w.row(int64_t(n));
    const float* x = g.x + t0 * K;
    const float* xs = g.xsum16 + t0 * (K / 16);
    switch (tokens) {
      case 1: return RowF32<F, 1>(row, K, x, xs, out);
      case 2: return RowF32<F, 2>(row, K, x, xs, out);
      case 3: return RowF32<F, 3>(row, K, x, xs, out);
      default: return RowF32<F, 4>(row, K, x, xs, out);
    }
  });
}

// F32 / F16 / BF16 (any K): each row widened into L1 (once, for its first group of tokens), then dotted.
void RowsF32Dense(const QuantGemvTask& g) {
  const size_t K = size_t(g.w.cols);
  thread_local AlignedBuffer<float> row;
  row.resize(K);
  for_rows_by_4_tokens(g, [&](size_t n, size_t t0, size_t tokens, float* out) {
    if (t0 == 0) dequantize_row(g.w.type, g.w.row(int64_t(n)), row.data(), int64_t(K));
    const float* x = g.x + t0 * K;
    switch (tokens) {
      case 1: return DotF32<1>(row.data(), x, K, out);
      case 2: return DotF32<2>(row.data(), x, K, out);
      case 3: return DotF32<3>(row.data(), x, K, out);
      default: return DotF32<4>(row.data(), x, K, out);
    }
  });
}

void GemvRowsF32(const QuantGemvTask& g) {
  switch (g.w.type) {
    case QuantType::Q4_0: return RowsF32Typed<Q4_0F>(g);
    case QuantType::Q4_1: return RowsF32Typed<Q4_1F>(g);
    case QuantType::Q5_0: return RowsF32Typed<Q5F<false>>(g);
    case QuantType::Q5_1: return RowsF32Typed<Q5F<true>>(g);
    case QuantType::Q8_0: return RowsF32Typed<Q8_0F>(g);
    case QuantType::Q4_K: return RowsF32Typed<QKF<false>>(g);
    case QuantType::Q5_K: return RowsF32Typed<QKF<true>>(g);
    case QuantType::Q6_K: return RowsF32Typed<Q6_KF>(g);
    case QuantType::Q2_K: return RowsF32Typed<UnpackedF<Q2_KU>>(g);
    case QuantType::Q3_K: return RowsF32Typed<UnpackedF<Q3_KU>>(g);
    case QuantType::MXFP4: return RowsF32Typed<UnpackedF<Mxfp4U>>(g);
    case QuantType::IQ4_NL: return RowsF32Typed<UnpackedF<Iq4_NLU>>(g);
    case QuantType::IQ4_XS: return RowsF32Typed<UnpackedF<Iq4_XSU>>(g);
    default: return RowsF32Dense(g);
  }
}

// xsum16[t, i] = sum of x[t, 16 i ... 16 i + 15].
void ActivationSums16(const float* x, size_t T, size_t K, float* xsum16) {
  const hn::CappedTag<float, 16> df;
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < K / 16; ++i) {
      auto s = hn::Zero(df);
      for (size_t e = 0; e < 16; e += hn::Lanes(df)) s = hn::Add(s, hn::LoadU(df, x + t * K + 16 * i + e));
      xsum16[t * (K / 16) + i] = hn::GetLane(hn::SumOfLanes(df, s));
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(GemvRowsF32);
HWY_EXPORT(ActivationSums16);

void quant_gemv_rows_f32(const QuantGemvTask& task) {
  if (task.w.row_group) return on_gguf_rows(task, quant_gemv_rows_f32);
  if (quant_gemv_f32_avx512_enabled() && quant_gemv_rows_f32_avx512(task)) return;
  HWY_DYNAMIC_DISPATCH(GemvRowsF32)(task);
}
void quant_gemv_rows_f32_portable(const QuantGemvTask& task) {
  if (task.w.row_group) return on_gguf_rows(task, quant_gemv_rows_f32_portable);
  HWY_DYNAMIC_DISPATCH(GemvRowsF32)(task);
}
void activation_sums16(const float* x, size_t T, size_t K, float* xsum16) {
  HWY_DYNAMIC_DISPATCH(ActivationSums16)(x, T, K, xsum16);
}

}  // namespace attnzoo
#endif
