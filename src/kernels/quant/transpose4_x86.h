#pragma once
// The regrouped units' 4 x 4 transpose (row_groups.h) for the two decoders that read them four rows at a time: the
// in-place f32 decode (dequant.cc, Highway, every x86 target) and the straight bf16 pairs
// (row_group_pairs_avx512bf16.cc, AVX-512 only). x86, SSE2.
#include <immintrin.h>

#include <cstdint>

namespace attnzoo {

// Rows i .. i + 3's 16 consecutive bytes from four slices `apart` bytes apart (64: one after the other; Q6_K's
// runs of three: 192), each holding the rows' 4 bytes side by side: a 4 x 4 transpose of 32-bit pieces. Always
// inlined: its callers are built for different targets, and an out-of-line copy built for AVX-512 could be the
// one the linker keeps for the SSE4 / AVX2 callers too.
[[gnu::always_inline]] inline void transpose4(const uint8_t* slice0, __m128i rows[4], int64_t apart = 64) {
  const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(slice0));
  const __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(slice0 + apart));
  const __m128i s2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(slice0 + 2 * apart));
  const __m128i s3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(slice0 + 3 * apart));
  const __m128i t0 = _mm_unpacklo_epi32(s0, s1), t1 = _mm_unpacklo_epi32(s2, s3);  // rows 0, 1
  const __m128i t2 = _mm_unpackhi_epi32(s0, s1), t3 = _mm_unpackhi_epi32(s2, s3);  // rows 2, 3
  rows[0] = _mm_unpacklo_epi64(t0, t1);
  rows[1] = _mm_unpackhi_epi64(t0, t1);
  rows[2] = _mm_unpacklo_epi64(t2, t3);
  rows[3] = _mm_unpackhi_epi64(t2, t3);
}

}  // namespace attnzoo
