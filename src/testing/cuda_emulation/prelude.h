#pragma once
// What nvcc gives device code without an include, for host compilation of kernel headers under
// ATTNZOO_CUDA_EMULATION: qualifiers, the thread / block indices (set by the CTA emulator, cta.h, before it
// switches to a thread), __syncthreads, the warp shuffles, the vector types and the few integer, float and atomic
// intrinsics the kernels use.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
// A static __shared__ variable is one object for the CTA's fibers, as on the device; the section lets the
// emulator poison every such variable (0xFF bytes) before each CTA, like the dynamic shared memory.
#define __shared__ static __attribute__((section("attnzoo_emulated_shared")))
#define __align__(n) alignas(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace attnzoo::cuda_emulation {
void sync_block();
[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void check_global(const void* p, size_t bytes, const char* what);
int thread_index();
const unsigned char* warp_exchange(const void* mine, size_t bytes, int kind);
// Collective kinds of the warp intrinsics below (sm80_emulated.h's start at 1).
enum PreludeCollective { kShuffleXor = 16, kShuffleIndex, kBallot };

// Every lane's `v`, then lane `from(lane)`'s. The full mask is the only one the kernels use; a partial one
// would need the lanes outside it to stay away, which the emulator's whole-warp exchange cannot express.
template <class T, class From>
T shuffle(unsigned mask, T v, int kind, From from) {
  static_assert(sizeof(T) <= 32);
  if (mask != 0xffffffffu) fail("shuffle with a partial mask %#x", mask);
  const unsigned char* all = warp_exchange(&v, sizeof v, kind);
  T r;
  std::memcpy(&r, all + 32 * (from(thread_index() % 32) % 32), sizeof r);
  return r;
}
}  // namespace attnzoo::cuda_emulation
inline void __syncthreads() { attnzoo::cuda_emulation::sync_block(); }

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  if (width != 32) attnzoo::cuda_emulation::fail("__shfl_xor_sync width %d", width);
  return attnzoo::cuda_emulation::shuffle(mask, v, attnzoo::cuda_emulation::kShuffleXor,
                                          [&](int lane) { return lane ^ lane_mask; });
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  if (width != 32) attnzoo::cuda_emulation::fail("__shfl_sync width %d", width);
  return attnzoo::cuda_emulation::shuffle(mask, v, attnzoo::cuda_emulation::kShuffleIndex,
                                          [&](int) { return src_lane; });
}

// Fibers switch only at collectives, so a read-modify-write is atomic here; the address is bounds-checked.
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  attnzoo::cuda_emulation::check_global(p, sizeof *p, "atomicMin");
  const unsigned long long old = *p;
  *p = std::min(old, v);
  return old;
}

inline unsigned atomicAdd(unsigned* p, unsigned v) {
  attnzoo::cuda_emulation::check_global(p, sizeof *p, "atomicAdd");
  const unsigned old = *p;
  *p = old + v;
  return old;
}
// CTAs run one after another and their fibers in one OS thread: every write is already seen by every later read.
inline void __threadfence() {}

struct int2 {
  int x, y;
};
inline int2 make_int2(int x, int y) { return {x, y}; }
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) float4 {
  float x, y, z, w;
};

inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// PRMT's default mode: byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {y, x}.
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}

// Round-to-nearest products and differences that nvcc never contracts into an FMA; the emulator's own code is
// built without FMA contraction, so plain operators are the same.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }

using std::isfinite;
using std::isnan;
using std::max;
using std::min;
