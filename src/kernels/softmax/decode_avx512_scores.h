#pragma once
// The score loop shared by the decode kernel's hand-written AVX-512 files (decode_avx512bf16.cc: vdpbf16ps,
// decode_avx512vnni.cc: vpdpwssd), each compiled for its own ISA: internal linkage, so each file keeps its own
// copy. A policy type says how 32 key elements become one register and how one dot-product instruction adds
// them against 32 query elements; this file says how keys, rows and heads are walked.
//
// Two keys per pass (callers that ask for them: int8 keys): each query vector is loaded once for both keys, and the
// two keys' 4-row lane sums share one interleave into 8-byte stores (key j and j + 1 of a row sit side by side in
// the score tile). The common head dims (64, 128, 256) are compile-time loop bounds, fully unrolled. Measured on
// the Zen 5 VM (one thread, int8 cache in L3, Hq=32, Hkv=8, D=128): the one-key loop with a run-time D spent most
// of its time in its own prologue and in register copies around each dot product.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/softmax/decode_avx512_sums.h"

namespace attnzoo {
namespace {

// One key's (kTwo: two keys') scores against kRows <= 4 query rows ldq apart; D = kD when kD > 0.
template <class Dot, size_t kRows, size_t kD, bool kTwo>
inline void score_rows(const typename Dot::Key* __restrict k0, const typename Dot::Key* __restrict k1, size_t D,
                       const typename Dot::Query* __restrict q, size_t ldq, float* __restrict s, size_t lds) {
  using Acc = typename Dot::Acc;
  Acc a0[4], a1[4];
  for (size_t r = 0; r < 4; ++r) a0[r] = a1[r] = Dot::zero();
  const size_t n = kD > 0 ? kD : D;
#pragma GCC unroll 8
  for (size_t d = 0; d < n; d += 32) {
    const auto x0 = Dot::load_key(k0 + d);
    if constexpr (kTwo) {
      const auto x1 = Dot::load_key(k1 + d);
      for (size_t r = 0; r < kRows; ++r) {
        const auto qv = Dot::load_query(q + r * ldq + d);
        a0[r] = Dot::dot(a0[r], x0, qv);
        a1[r] = Dot::dot(a1[r], x1, qv);
      }
    } else {
      for (size_t r = 0; r < kRows; ++r) a0[r] = Dot::dot(a0[r], x0, Dot::load_query(q + r * ldq + d));
    }
  }
  const __m128 s0 = sums_of_four(Dot::to_f32(a0[0]), Dot::to_f32(a0[1]), Dot::to_f32(a0[2]), Dot::to_f32(a0[3]));
  if constexpr (kTwo) {
    const __m128 s1 = sums_of_four(Dot::to_f32(a1[0]), Dot::to_f32(a1[1]), Dot::to_f32(a1[2]), Dot::to_f32(a1[3]));
    const __m128 rows01 = _mm_unpacklo_ps(s0, s1), rows23 = _mm_unpackhi_ps(s0, s1);
    _mm_storel_pi(reinterpret_cast<__m64*>(s), rows01);
    if (kRows > 1) _mm_storeh_pi(reinterpret_cast<__m64*>(s + lds), rows01);
    if (kRows > 2) _mm_storel_pi(reinterpret_cast<__m64*>(s + 2 * lds), rows23);
    if (kRows > 3) _mm_storeh_pi(reinterpret_cast<__m64*>(s + 3 * lds), rows23);
  } else {
    alignas(16) float sums[4];
    _mm_store_ps(sums, s0);
    for (size_t r = 0; r < kRows; ++r) s[r * lds] = sums[r];
  }
}

template <class Dot, size_t kD, bool kTwo>
inline void score_heads(const typename Dot::Key* k0, const typename Dot::Key* k1, int64_t k_head, size_t H,
                        size_t D, const typename Dot::Query* q, size_t R, float* s, size_t lds_head, size_t lds) {
  for (size_t h = 0; h < H; ++h) {
    const typename Dot::Key* kh0 = k0 + int64_t(h) * k_head;
    const typename Dot::Key* kh1 = kTwo ? k1 + int64_t(h) * k_head : nullptr;
    const typename Dot::Query* qh = q + h * R * D;
    float* sh = s + h * lds_head;
    size_t r = 0;
    for (; r + 4 <= R; r += 4) score_rows<Dot, 4, kD, kTwo>(kh0, kh1, D, qh + r * D, D, sh + r * lds, lds);
    switch (R - r) {
      case 3: score_rows<Dot, 3, kD, kTwo>(kh0, kh1, D, qh + r * D, D, sh + r * lds, lds); break;
      case 2: score_rows<Dot, 2, kD, kTwo>(kh0, kh1, D, qh + r * D, D, sh + r * lds, lds); break;
      case 1: score_rows<Dot, 1, kD, kTwo>(kh0, kh1, D, qh + r * D, D, sh + r * lds, lds); break;
      default: break;
    }
  }
}

// Scores of key k0 (kTwo: and k1, unless it is null) for H heads of R query rows each: s[h * lds_head + r * lds]
// (and + 1 for k1), unscaled. Head h's key row starts at k + h * k_head elements, its query rows at
// q + h * R * D. D is a multiple of 32.
template <class Dot, bool kTwo>
inline void score_keys(const typename Dot::Key* k0, const typename Dot::Key* k1, int64_t k_head, size_t H,
                       size_t D, const typename Dot::Query* q, size_t R, float* s, size_t lds_head, size_t lds) {
  auto run = [&](auto d) {
    if (kTwo && k1)
      score_heads<Dot, decltype(d)::value, true>(k0, k1, k_head, H, D, q, R, s, lds_head, lds);
    else
      score_heads<Dot, decltype(d)::value, false>(k0, k1, k_head, H, D, q, R, s, lds_head, lds);
  };
  switch (D) {
    case 64: return run(std::integral_constant<size_t, 64>());
    case 128: return run(std::integral_constant<size_t, 128>());
    case 256: return run(std::integral_constant<size_t, 256>());
    default: return run(std::integral_constant<size_t, 0>());
  }
}

}  // namespace
}  // namespace attnzoo
