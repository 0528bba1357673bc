// Compiled with -mavx2 (CMakeLists.txt); reached only when an AVX2 or AVX-512 target is active. The 8-bit peak of
// the AVX2 integer rows (gemv_avx2.cc, gemv_groups_avx2.cc), in their instruction mix: without VNNI each 32 u8 x s8
// products cost vpmaddubsw (pairs into i16) + vpmaddwd against ones (pairs of pairs into i32) + vpaddd, three
// instructions where vpdpbusd takes one, so this ceiling sits well under measure_vnni_int8_peak's on the same core.
// With AVX-VNNI (the regrouped rows use its VEX vpdpbusd where avx_vnni_support().use) the chain is that instruction
// alone. 12 independent accumulators in both; the signed bytes alternate +1 / -1 so each lane's products cancel
// (no overflow, no i16 saturation) yet nothing is constant to fold.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace attnzoo::bench {

namespace {
constexpr int kChains = 12;

int reduce(const __m256i* c) {
  __m256i s = c[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi32(s, c[i]);
  alignas(32) int32_t v[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), s);
  int total = 0;
  for (int32_t x : v) total += x;
  return total;
}
}  // namespace

float Avx2Int8Chains(int64_t iterations, float seed) {
  __m256i c[kChains];
  for (int i = 0; i < kChains; ++i) c[i] = _mm256_set1_epi32(int(seed) + i);
  const __m256i a = _mm256_set1_epi8(char(uint8_t(int(seed) & 0x7f)));
  const __m256i b = _mm256_set1_epi32(int(0xff01ff01u));  // bytes 1, -1, 1, -1
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iterations; ++it) {
    // As asm: the products of a and b do not change, and written as intrinsics the compiler would form them once
    // outside the loop (the rows form new ones from every load).
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) {
      __m256i t;
      asm("vpmaddubsw %[b], %[a], %[t]\n\t"
          "vpmaddwd %[ones], %[t], %[t]\n\t"
          "vpaddd %[t], %[c], %[c]"
          : [c] "+x"(c[i]), [t] "=&x"(t)
          : [a] "x"(a), [b] "x"(b), [ones] "x"(ones));
    }
  }
  return float(reduce(c));
}

float AvxVnniInt8Chains(int64_t iterations, float seed) {
  __m256i c[kChains];
  for (int i = 0; i < kChains; ++i) c[i] = _mm256_set1_epi32(int(seed) + i);
  const __m256i a = _mm256_set1_epi8(char(uint8_t(int(seed) & 0x7f)));
  const __m256i b = _mm256_set1_epi32(int(0xff01ff01u));
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(c[i]) : "x"(a), "x"(b));
  }
  return float(reduce(c));
}

}  // namespace attnzoo::bench
