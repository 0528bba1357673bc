#pragma once
// For the by-hand decode-GEMV stream benchmarks: the thread's CPU time (other jobs on the machine do not count
// against a kernel), and the plain read they hold their kernels to: four chains of vector loads and adds and
// nothing else, streamed as the read probe of `attnzoo bench` streams (64-byte loads where the CPU has AVX-512,
// ~5% above 32-byte ones on the Emerald Rapids; AVX2 on other x86 CPUs; elsewhere C++ the compiler vectorizes).
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <cstddef>

namespace attnzoo::testing {

inline double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) inline float stream_read_avx2(const float* p, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

__attribute__((target("avx512f"))) inline float stream_read_avx512(const float* p, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

// Sums the first n / 64 * 64 floats of p (the benchmarks read whole matrices, multiples of 256 bytes).
inline float stream_read(const float* p, size_t n) {
  return __builtin_cpu_supports("avx512f") ? stream_read_avx512(p, n) : stream_read_avx2(p, n);
}
#else
inline float stream_read(const float* p, size_t n) {
  float s[4] = {};
  for (size_t i = 0; i + 64 <= n; i += 64)
    for (size_t j = 0; j < 64; ++j) s[j % 4] += p[i + j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}
#endif

}  // namespace attnzoo::testing
