// Compiled with -mavx512bf16 (CMakeLists.txt); reached only when bf16_dot_available() said the CPU has it.
// The bf16 twin of FmaChains: 12 independent vdpbf16ps accumulators, each instruction 32 bf16 products
// summed in pairs into 16 f32 lanes (64 flops). The accumulators grow by a tiny step, so they never overflow.
// GCC 12 flags its own AVX-512 headers (results seeded from _mm512_undefined_*) once they inline here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace attnzoo::bench {

float Bf16DotChains(int64_t iterations, float seed) {
  constexpr int kChains = 12;
  __m512 c[kChains];
  for (int i = 0; i < kChains; ++i) c[i] = _mm512_set1_ps(seed + float(i));
  const __m512 small = _mm512_set1_ps(1e-7f);
  const __m512bh a = _mm512_cvtne2ps_pbh(small, small), b = _mm512_cvtne2ps_pbh(small, small);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) c[i] = _mm512_dpbf16_ps(c[i], a, b);
  }
  __m512 s = c[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, c[i]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace attnzoo::bench
