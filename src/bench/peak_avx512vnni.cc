// Compiled with -mavx512vnni (CMakeLists.txt); reached only when quant_gemv_vnni_enabled() said the CPU has it.
// The 8-bit twin of FmaChains: 12 independent vpdpbusd accumulators, each instruction 64 unsigned x signed byte
// products summed in fours into 16 int32 lanes (128 operations, counted as flops are). The signed bytes alternate
// +1 / -1, so each lane's four products cancel and the accumulators never overflow, yet nothing is constant to fold.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace attnzoo::bench {

float VnniInt8Chains(int64_t iterations, float seed) {
  constexpr int kChains = 12;
  __m512i c[kChains];
  for (int i = 0; i < kChains; ++i) c[i] = _mm512_set1_epi32(int(seed) + i);
  const __m512i a = _mm512_set1_epi8(char(uint8_t(int(seed) & 0x7f)));
  const __m512i b = _mm512_set1_epi32(int(0xff01ff01u));  // bytes 1, -1, 1, -1
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) c[i] = _mm512_dpbusd_epi32(c[i], a, b);
  }
  __m512i s = c[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, c[i]);
  return float(_mm512_reduce_add_epi32(s));
}

}  // namespace attnzoo::bench
