#pragma once
// What nvcc gives device code without an include, for host compilation of kernel headers under
// ATTNZOO_CUDA_EMULATION: qualifiers, the thread / block indices (set by the CTA emulator, cta.h, before it
// switches to a thread), __syncthreads, the vector types and the few integer intrinsics the kernels use.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) alignas(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace attnzoo::cuda_emulation {
void sync_block();
}
inline void __syncthreads() { attnzoo::cuda_emulation::sync_block(); }

struct int2 {
  int x, y;
};
inline int2 make_int2(int x, int y) { return {x, y}; }
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }

inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// PRMT's default mode: byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {y, x}.
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}

using std::max;
using std::min;
