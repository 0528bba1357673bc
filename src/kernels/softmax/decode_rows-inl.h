// Highway row helpers of the decode kernel (decode.cc), compiled once per SIMD target: widening cache rows,
// query-key scores, the online-softmax row update and the P * V accumulation.
//
// bf16 caches are widened in *pair order*: 2L elements are loaded as L u32 lanes and split into the even
// elements (lane << 16) and the odd ones (lane & 0xffff0000), two cheap ops for 2L elements where a widening
// PromoteTo costs a shuffle and a shift per L. Each 2L-element group of a row then comes out as [evens, odds];
// the query rows are permuted the same way once per chunk (a dot product does not care about order) and the
// output rows are put back in order once per chunk, so the per-key work never reorders anything.
//
// int8 and fp8 caches are widened from their bytes in registers: int8 through i32, fp8 e4m3 through f16 (the
// f16 to f32 conversion is exact for f16 subnormals whatever the flush-to-zero mode) to 2^-8 times its value,
// the 2^8 riding on the row's scale (kFp8Widened); the row's scale is applied to the score or the softmax
// weight, never per element.
#if defined(ATTNZOO_DECODE_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_DECODE_ROWS_INL_H_
#undef ATTNZOO_DECODE_ROWS_INL_H_
#else
#define ATTNZOO_DECODE_ROWS_INL_H_
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "core/convert.h"
#include "kernels/common/fast_exp2-inl.h"
#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/tiling.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pair splitting assumes element 2i sits in the low half of u32 lane i");

template <class T>
constexpr bool kPairOrder = std::is_same_v<T, hwy::bfloat16_t>;

template <class T>
constexpr bool kQuantized = std::is_same_v<T, int8_t> || std::is_same_v<T, Fp8E4M3>;

// Elements of an n-element row that are widened in pair order (whole 2L groups; the rest keep their order).
template <class T>
HWY_INLINE size_t PairedPrefix(size_t n) {
  if constexpr (kPairOrder<T>) {
    const size_t group = 2 * hn::Lanes(DF());
    return n / group * group;
  } else {
    return 0;
  }
}

// row[0, n) (n a multiple of 2L) from natural order to pair order, or back (inverse = true).
HWY_INLINE void PermutePairs(float* HWY_RESTRICT row, size_t n, bool inverse) {
  const size_t L = hn::Lanes(DF());
  alignas(64) float tmp[2 * HWY_MAX_BYTES / sizeof(float)];
  for (size_t g = 0; g < n; g += 2 * L) {
    for (size_t i = 0; i < L; ++i) {
      if (inverse) {
        tmp[2 * i] = row[g + i];
        tmp[2 * i + 1] = row[g + L + i];
      } else {
        tmp[i] = row[g + 2 * i];
        tmp[L + i] = row[g + 2 * i + 1];
      }
    }
    std::copy(tmp, tmp + 2 * L, row + g);
  }
}

inline float ScalarToF32(float x) { return x; }
inline float ScalarToF32(hwy::bfloat16_t x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return bf16_to_f32(bits);
}
inline float ScalarToF32(hwy::float16_t x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return f16_to_f32(bits);
}
inline float ScalarToF32(int8_t x) { return float(x); }
inline float ScalarToF32(Fp8E4M3 x) { return f8e4m3_to_f32(x.bits) * 0x1p-8f; }  // as LoadF32 widens it

// What LoadF32 / LoadTailF32 give for an element of value v: v * kWidened<T>; a quantized row's scale is
// divided by it once per row instead of multiplying every element.
template <class T>
constexpr float kWidened = std::is_same_v<T, Fp8E4M3> ? 0x1p-8f : 1.f;

// 2L bf16 elements as [even elements], [odd elements] in f32.
HWY_INLINE void SplitPairs(const hwy::bfloat16_t* HWY_RESTRICT p, VF& even, VF& odd) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p));
  even = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
  odd = hn::BitCast(df, hn::And(pairs, hn::Set(du, 0xFFFF0000u)));
}

template <class T>
HWY_INLINE VF LoadF32(DF df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const hn::Rebind<int8_t, DF> d8;
    const hn::Rebind<int32_t, DF> di;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
  } else if constexpr (std::is_same_v<T, Fp8E4M3>) {
    // Sign to bit 15, exponent and mantissa to bits 7-13: an f16 of value * 2^-8, exact for every e4m3 code
    // (f16 has one more exponent bit, so e4m3's subnormals land on f16's), then one hardware f16 widening; the
    // 2^-8 stays (kWidened). b + (b & 0x80) carries the sign bit one place up before the shift.
    const hn::Rebind<uint8_t, DF> d8;
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto b = hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const uint8_t*>(p)));
    const auto bits = hn::ShiftLeft<7>(hn::Add(b, hn::And(b, hn::Set(d16, 0x80))));
    return hn::PromoteTo(df, hn::BitCast(dh, bits));
  } else if constexpr (std::is_same_v<T, hwy::float16_t> && HWY_TARGET == HWY_SCALAR) {
    return hn::Set(df, ScalarToF32(*p));  // Highway 1.0's scalar f16 widening reads Inf and NaN as numbers
  } else {
    const hn::Rebind<T, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, p));
  }
}

// The last n < L elements of a row, widened and zero padded to a full vector.
template <class T>
HWY_INLINE VF LoadTailF32(DF df, const T* HWY_RESTRICT p, size_t n) {
  alignas(64) float tmp[HWY_MAX_BYTES / sizeof(float)] = {};
  for (size_t i = 0; i < n; ++i) tmp[i] = ScalarToF32(p[i]);
  return hn::Load(df, tmp);
}

#if HWY_TARGET == HWY_SCALAR
HWY_INLINE void SumsOfFour(VF a, VF b, VF c, VF e, float* HWY_RESTRICT out) {
  out[0] = hn::GetLane(a);
  out[1] = hn::GetLane(b);
  out[2] = hn::GetLane(c);
  out[3] = hn::GetLane(e);
}
#else
// The 128-bit blocks of v added: lane i is the sum of lane i of every block.
template <class D>
HWY_INLINE hn::Vec<hn::Full128<float>> FoldBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    return v;
  }
}

// Per 128-bit block: [sum a, sum b, sum c, sum e] over that block's lanes (two interleave levels).
HWY_INLINE VF BlockSumsOfFour(VF a, VF b, VF c, VF e) {
  const DF d;
  const hn::Repartition<double, DF> dd;
  const VF ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));
  const VF ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
  const auto ab64 = hn::BitCast(dd, ab), ce64 = hn::BitCast(dd, ce);
  return hn::Add(hn::BitCast(d, hn::InterleaveLower(dd, ab64, ce64)),
                 hn::BitCast(d, hn::InterleaveUpper(dd, ab64, ce64)));
}

// The lane sums of four vectors: a transposing tree (two interleave levels, then one fold of the blocks)
// costs about a third of four separate full reductions, which matter at one reduction per (row, key).
HWY_INLINE void SumsOfFour(VF a, VF b, VF c, VF e, float* HWY_RESTRICT out) {
  hn::StoreU(FoldBlocks(DF(), BlockSumsOfFour(a, b, c, e)), hn::Full128<float>(), out);
}
#endif

// s[r * lds] = dot(q row r, k row) for kNR query rows (q rows are Dp apart, zero padded past D, and in pair
// order over their first `paired` elements).
template <size_t kNR, class T>
HWY_INLINE void ScoreRows(const T* HWY_RESTRICT k, size_t D, size_t paired, const float* HWY_RESTRICT q, size_t Dp,
                          float* HWY_RESTRICT s, size_t lds) {
  const DF df;
  const size_t L = hn::Lanes(df);
  constexpr size_t kPadded = (kNR + 3) / 4 * 4;  // rows past kNR stay zero (the sums below take fours)
  VF acc[kPadded];
  for (size_t r = 0; r < kPadded; ++r) acc[r] = hn::Zero(df);
  size_t d = 0;
  if constexpr (kPairOrder<T>) {
#pragma GCC unroll 4
    for (; d < paired; d += 2 * L) {
      VF even, odd;
      SplitPairs(k + d, even, odd);
      for (size_t r = 0; r < kNR; ++r) {
        acc[r] = hn::MulAdd(hn::Load(df, q + r * Dp + d), even, acc[r]);
        acc[r] = hn::MulAdd(hn::Load(df, q + r * Dp + d + L), odd, acc[r]);
      }
    }
  }
#pragma GCC unroll 4
  for (; d + L <= D; d += L) {
    const VF kv = LoadF32(df, k + d);
    for (size_t r = 0; r < kNR; ++r) acc[r] = hn::MulAdd(hn::Load(df, q + r * Dp + d), kv, acc[r]);
  }
  if (d < D) {
    const VF kv = LoadTailF32(df, k + d, D - d);
    for (size_t r = 0; r < kNR; ++r) acc[r] = hn::MulAdd(hn::Load(df, q + r * Dp + d), kv, acc[r]);
  }
#if HWY_TARGET == HWY_SCALAR
  for (size_t r = 0; r < kNR; ++r) s[r * lds] = hn::GetLane(acc[r]);
#else
  // Every row's lanes are summed by the one tree of SumsOfFour (rows past kNR padded with zeros, which leave
  // the others' sums as they are), the tree the two-key scores take too: a score then does not depend on how
  // many rows or keys were scored beside it (core/batch_invariance.h).
  for (size_t r = 0; r < kNR; r += 4) {
    alignas(16) float sums[4];
    SumsOfFour(acc[r], acc[r + 1], acc[r + 2], acc[r + 3], sums);
    for (size_t i = 0; i < 4 && r + i < kNR; ++i) s[(r + i) * lds] = sums[i];
  }
#endif
}

#if HWY_TARGET != HWY_SCALAR
// Scores of two keys (k0, k1: keys j and j + 1) against kNR <= 4 query rows: s[r * lds + {0, 1}]. Each query
// vector is loaded once for both keys, and the two keys' lane sums share one transposing tree whose results
// leave as one 8-byte store per row instead of one scalar store per (row, key). On targets without vdpbf16ps
// the per-key loop overhead, lane sums and scattered stores were a quarter of the cycles with the cache in L2.
template <size_t kNR, class T>
HWY_INLINE void ScoreRowsTwoKeys(const T* HWY_RESTRICT k0, const T* HWY_RESTRICT k1, size_t D, size_t paired,
                                 const float* HWY_RESTRICT q, size_t Dp, float* HWY_RESTRICT s, size_t lds) {
  static_assert(kNR >= 1 && kNR <= 4, "two keys x 4 rows of accumulators fill the 16 registers of AVX2");
  const DF df;
  const size_t L = hn::Lanes(df);
  VF acc0[4], acc1[4];
  for (size_t r = 0; r < 4; ++r) acc0[r] = acc1[r] = hn::Zero(df);
  auto step = [&](size_t d, VF x0, VF x1) HWY_ATTR {
    for (size_t r = 0; r < kNR; ++r) {
      const VF qv = hn::Load(df, q + r * Dp + d);
      acc0[r] = hn::MulAdd(qv, x0, acc0[r]);
      acc1[r] = hn::MulAdd(qv, x1, acc1[r]);
    }
  };
  size_t d = 0;
  if constexpr (kPairOrder<T>) {
#pragma GCC unroll 2
    for (; d < paired; d += 2 * L) {
      VF even0, odd0, even1, odd1;
      SplitPairs(k0 + d, even0, odd0);
      SplitPairs(k1 + d, even1, odd1);
      step(d, even0, even1);
      step(d + L, odd0, odd1);
    }
  }
#pragma GCC unroll 2
  for (; d + L <= D; d += L) step(d, LoadF32(df, k0 + d), LoadF32(df, k1 + d));
  if (d < D) step(d, LoadTailF32(df, k0 + d, D - d), LoadTailF32(df, k1 + d, D - d));
  const hn::Full128<float> d4;
  const hn::Full64<float> d2;
  const auto x0 = FoldBlocks(df, BlockSumsOfFour(acc0[0], acc0[1], acc0[2], acc0[3]));  // key 0, rows 0-3
  const auto x1 = FoldBlocks(df, BlockSumsOfFour(acc1[0], acc1[1], acc1[2], acc1[3]));
  const auto rows01 = hn::InterleaveLower(d4, x0, x1), rows23 = hn::InterleaveUpper(d4, x0, x1);
  hn::StoreU(hn::LowerHalf(d2, rows01), d2, s);
  if (kNR > 1) hn::StoreU(hn::UpperHalf(d2, rows01), d2, s + lds);
  if (kNR > 2) hn::StoreU(hn::LowerHalf(d2, rows23), d2, s + 2 * lds);
  if (kNR > 3) hn::StoreU(hn::UpperHalf(d2, rows23), d2, s + 3 * lds);
}
#endif

constexpr size_t kRowsPerPass = 8;  // query rows whose accumulators live in registers during one K-row pass

// Scores of one key against all R query rows, kRowsPerPass rows per pass over the (L1-resident) K row.
template <class T>
HWY_INLINE void ScoreKey(const T* HWY_RESTRICT k, size_t D, size_t paired, const float* HWY_RESTRICT q, size_t Dp,
                         size_t R, float* HWY_RESTRICT s, size_t lds) {
  for (size_t r0 = 0; r0 < R; r0 += kRowsPerPass) {
    const float* qr = q + r0 * Dp;
    float* sr = s + r0 * lds;
    switch (std::min(kRowsPerPass, R - r0)) {
      case 8: ScoreRows<8>(k, D, paired, qr, Dp, sr, lds); break;
      case 7: ScoreRows<7>(k, D, paired, qr, Dp, sr, lds); break;
      case 6: ScoreRows<6>(k, D, paired, qr, Dp, sr, lds); break;
      case 5: ScoreRows<5>(k, D, paired, qr, Dp, sr, lds); break;
      case 4: ScoreRows<4>(k, D, paired, qr, Dp, sr, lds); break;
      case 3: ScoreRows<3>(k, D, paired, qr, Dp, sr, lds); break;
      case 2: ScoreRows<2>(k, D, paired, qr, Dp, sr, lds); break;
      default: ScoreRows<1>(k, D, paired, qr, Dp, sr, lds); break;
    }
  }
}

// Scores of keys j and j + 1 (rows k0, k1) against all R query rows: s[r * lds + {0, 1}].
template <class T>
HWY_INLINE void ScoreTwoKeys(const T* HWY_RESTRICT k0, const T* HWY_RESTRICT k1, size_t D, size_t paired,
                             const float* HWY_RESTRICT q, size_t Dp, size_t R, float* HWY_RESTRICT s, size_t lds) {
#if HWY_TARGET == HWY_SCALAR
  ScoreKey(k0, D, paired, q, Dp, R, s, lds);
  ScoreKey(k1, D, paired, q, Dp, R, s + 1, lds);
#else
  for (size_t r0 = 0; r0 < R; r0 += 4) {
    const float* qr = q + r0 * Dp;
    float* sr = s + r0 * lds;
    switch (std::min<size_t>(4, R - r0)) {
      case 4: ScoreRowsTwoKeys<4>(k0, k1, D, paired, qr, Dp, sr, lds); break;
      case 3: ScoreRowsTwoKeys<3>(k0, k1, D, paired, qr, Dp, sr, lds); break;
      case 2: ScoreRowsTwoKeys<2>(k0, k1, D, paired, qr, Dp, sr, lds); break;
      default: ScoreRowsTwoKeys<1>(k0, k1, D, paired, qr, Dp, sr, lds); break;
    }
  }
#endif
}

// One block of output columns for kRows rows: acc[r][c] += p[r][j] * x_c(j) over the tile's keys j, where
// load(j, x) widens key j's kVecs vectors of this block. The accumulators stay in registers for the whole
// tile and each V vector is widened once and used by every row straight from its register.
template <size_t kRows, size_t kVecs, class Load>
HWY_INLINE void AccumulateBlock(size_t cols, const float* HWY_RESTRICT p, size_t ldp, float* HWY_RESTRICT o,
                                size_t ldo, const Load& load) {
  const DF df;
  const size_t L = hn::Lanes(df);
  VF acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::Load(df, o + r * ldo + c * L);
  for (size_t j = 0; j < cols; ++j) {
    VF x[kVecs];
    load(j, x);
    for (size_t r = 0; r < kRows; ++r) {
      const VF w = hn::Set(df, p[r * ldp + j]);
      for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::MulAdd(w, x[c], acc[r][c]);
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kVecs; ++c) hn::Store(acc[r][c], df, o + r * ldo + c * L);
}

// Wide targets have 32 vector registers: 4 rows x 4 vectors of accumulators; narrow ones 16: 4 x 2.
constexpr size_t kAccVecs = HWY_MAX_BYTES >= 64 ? 4 : 2;

// o[r][0, Dv) += sum_j p[r * ldp + j] * V row j for kRows rows (o rows ldo apart, in pair order over their
// first `paired` elements). Key j's row is v + vofs[j].
template <size_t kRows, class T>
HWY_INLINE void AccumulateRows(const T* HWY_RESTRICT v, const int64_t* HWY_RESTRICT vofs, size_t cols, size_t Dv,
                               size_t paired, const float* HWY_RESTRICT p, size_t ldp, float* HWY_RESTRICT o,
                               size_t ldo) {
  const DF df;
  const size_t L = hn::Lanes(df);
  size_t d = 0;
  if constexpr (kPairOrder<T>) {
    for (; d + kAccVecs * L <= paired; d += kAccVecs * L)
      AccumulateBlock<kRows, kAccVecs>(cols, p, ldp, o + d, ldo, [&](size_t j, VF* x) {
        for (size_t c = 0; c < kAccVecs; c += 2) SplitPairs(v + vofs[j] + d + c * L, x[c], x[c + 1]);
      });
    for (; d < paired; d += 2 * L)
      AccumulateBlock<kRows, 2>(cols, p, ldp, o + d, ldo,
                                [&](size_t j, VF* x) { SplitPairs(v + vofs[j] + d, x[0], x[1]); });
  }
  for (; d + kAccVecs * L <= Dv; d += kAccVecs * L)
    AccumulateBlock<kRows, kAccVecs>(cols, p, ldp, o + d, ldo, [&](size_t j, VF* x) {
      for (size_t c = 0; c < kAccVecs; ++c) x[c] = LoadF32(df, v + vofs[j] + d + c * L);
    });
  for (; d + L <= Dv; d += L)
    AccumulateBlock<kRows, 1>(cols, p, ldp, o + d, ldo, [&](size_t j, VF* x) { x[0] = LoadF32(df, v + vofs[j] + d); });
  if (d < Dv)
    AccumulateBlock<kRows, 1>(cols, p, ldp, o + d, ldo,
                              [&](size_t j, VF* x) { x[0] = LoadTailF32(df, v + vofs[j] + d, Dv - d); });
}

// All R rows of one head, four at a time.
template <class T>
HWY_INLINE void AccumulateHead(const T* HWY_RESTRICT v, const int64_t* HWY_RESTRICT vofs, size_t cols, size_t Dv,
                               size_t paired, size_t R, const float* HWY_RESTRICT p, size_t ldp,
                               float* HWY_RESTRICT o, size_t ldo) {
  for (size_t r = 0; r < R; r += 4) {
    const float* pr = p + r * ldp;
    float* orow = o + r * ldo;
    switch (std::min<size_t>(4, R - r)) {
      case 4: AccumulateRows<4>(v, vofs, cols, Dv, paired, pr, ldp, orow, ldo); break;
      case 3: AccumulateRows<3>(v, vofs, cols, Dv, paired, pr, ldp, orow, ldo); break;
      case 2: AccumulateRows<2>(v, vofs, cols, Dv, paired, pr, ldp, orow, ldo); break;
      default: AccumulateRows<1>(v, vofs, cols, Dv, paired, pr, ldp, orow, ldo); break;
    }
  }
}

// AccumulateHead over the keys of `runs` (tiling.h) for the new tokens that see them, G rows per token (token t's
// from row t * G): one call per run of consecutive tokens, so a wholly visible tile is one call for all rows.
template <class T>
HWY_INLINE void AccumulateRuns(const T* HWY_RESTRICT v, const int64_t* HWY_RESTRICT vofs,
                               const std::vector<VisibleRun>& runs, size_t Dv, size_t paired, size_t G,
                               const float* HWY_RESTRICT p, size_t ldp, float* HWY_RESTRICT o, size_t ldo) {
  for (const VisibleRun& run : runs)
    for (uint32_t rest = run.queries; rest != 0;) {
      const int t0 = std::countr_zero(rest), t1 = t0 + std::countr_one(rest >> t0);
      rest = uint32_t(uint64_t(rest) >> t1 << t1);
      AccumulateHead(v, vofs + run.begin, size_t(run.end - run.begin), Dv, paired, size_t(t1 - t0) * G,
                     p + size_t(t0) * G * ldp + size_t(run.begin), ldp, o + size_t(t0) * G * ldo, ldo);
    }
}

HWY_INLINE void ScaleRow(float* HWY_RESTRICT o, size_t n, float alpha) {
  const DF df;
  const auto va = hn::Set(df, alpha);
  for (size_t j = 0; j < n; j += hn::Lanes(df)) hn::Store(hn::Mul(hn::Load(df, o + j), va), df, o + j);
}

// What one score row needs to finish its scores (a copy of prefill's notion, kept local so the two kernels
// can evolve independently).
struct RowContext {
  float scale;  // applied to the scores first (1 when the queries carry it)
  float softcap;
  float alibi_slope;
  bool partial;  // the tile straddles the mask: test every element
  const MaskGeometry* mask;
  int64_t qpos;
  int64_t kpos0;
};

// Applies the scale, softcap, ALiBi and (in partial tiles) the element mask to one row of scores, folds it into the
// running (m, l) and leaves exp(s - m) in place; returns the factor for the row's output accumulator.
HWY_INLINE float SoftmaxRow(float* HWY_RESTRICT s, size_t cols, const RowContext& ctx, float* m, float* l) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t ncols = (cols + L - 1) / L * L;
  if (ctx.scale != 1.f) ScaleRow(s, ncols, ctx.scale);
  if (ctx.softcap > 0.f) {
    const auto cap = hn::Set(df, ctx.softcap), inv = hn::Set(df, 1.f / ctx.softcap);
    for (size_t j = 0; j < ncols; j += L)
      hn::Store(hn::Mul(cap, hn::Tanh(df, hn::Mul(hn::Load(df, s + j), inv))), df, s + j);
  }
  if (ctx.alibi_slope != 0.f) {
    for (size_t j = 0; j < cols; ++j) {
      const int64_t dist = ctx.qpos - (ctx.kpos0 + int64_t(j));
      s[j] -= ctx.alibi_slope * float(dist < 0 ? -dist : dist);
    }
  }
  if (ctx.partial) {
    for (size_t j = 0; j < cols; ++j)
      if (!ctx.mask->visible(ctx.qpos, ctx.kpos0 + int64_t(j))) s[j] = -INFINITY;
  }
  for (size_t j = cols; j < ncols; ++j) s[j] = -INFINITY;

  const float row_max = MaxOrNaN(df, s, ncols);
  if (std::isnan(row_max)) return PoisonRow(df, s, ncols, l);
  const float m_old = *m;
  const float m_new = std::max(m_old, row_max);
  if (m_new == -INFINITY) {  // nothing visible to this row yet: the tile adds nothing
    for (size_t j = 0; j < ncols; j += L) hn::Store(hn::Zero(df), df, s + j);
    return 1.f;
  }
  const auto vm = hn::Set(df, m_new), vlog2e = hn::Set(df, 1.4426950408889634f);
  auto vsum = hn::Zero(df);
  for (size_t j = 0; j < ncols; j += L) {
    // exp(s - m) = 2^((s - m) log2 e), every argument <= 0: the scans' and prefill's fast 2^x (about half the
    // instructions of Highway's general Exp); masked entries give exactly 0.
    const auto e = FastExp2(df, hn::Mul(hn::Sub(hn::Load(df, s + j), vm), vlog2e));
    vsum = hn::Add(vsum, e);
    hn::Store(e, df, s + j);
  }
  const float alpha = (m_old == -INFINITY) ? 0.f : std::exp(m_old - m_new);
  *l = *l * alpha + hn::GetLane(hn::SumOfLanes(df, vsum));
  *m = m_new;
  return alpha;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // ATTNZOO_DECODE_ROWS_INL_H_
