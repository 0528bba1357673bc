#pragma once
// sm80.cuh's instructions on the host, for the CTA emulator (testing/cuda_emulation/cta.h): what sm80.cuh
// includes in place of its inline PTX when ATTNZOO_CUDA_EMULATION is defined. Same names and signatures; the
// semantics are the PTX ISA's, lane by lane (fragment layouts as documented in sm80.cuh), and every shared or
// global address is bounds- and alignment-checked. A change to one file's signatures belongs in the other.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "testing/cuda_emulation/cta.h"

namespace attnzoo::sm80 {

namespace emulated {
namespace emu = attnzoo::cuda_emulation;
enum Collective { kLdmatrix = 1, kLdmatrixTrans, kMma, kShuffle };

template <class Elem>
inline float widen(uint16_t bits) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) return bf16_to_f32(bits);
  else return f16_to_f32(bits);
}

inline uint16_t shared_u16(uint32_t addr) {
  uint16_t v;
  std::memcpy(&v, emu::shared_at(addr, 2, "ldmatrix"), 2);
  return v;
}

// Lanes 8i..8i+7 give the row addresses of matrix i; the lane gets row g (with trans: column g), elements
// 2t and 2t+1 of every matrix.
inline void ldmatrix(uint32_t (&r)[4], uint32_t addr, bool trans) {
  if (addr % 16) emu::fail("ldmatrix: row address %u not 16-byte aligned", addr);
  emu::shared_at(addr, 16, "ldmatrix row");
  const auto* rows = reinterpret_cast<const uint32_t*>(emu::warp_exchange(&addr, 4, trans ? kLdmatrixTrans : kLdmatrix));
  constexpr int kStride = 32 / 4;  // slot stride in uint32s
  const int lane = emu::thread_index() % 32, g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (!trans) {
      const uint32_t row = rows[(8 * i + g) * kStride];
      lo = shared_u16(row + 4 * t);
      hi = shared_u16(row + 4 * t + 2);
    } else {
      lo = shared_u16(rows[(8 * i + 2 * t) * kStride] + 2 * g);
      hi = shared_u16(rows[(8 * i + 2 * t + 1) * kStride] + 2 * g);
    }
    r[i] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
}
}  // namespace emulated

inline uint32_t smem_u32(const void* p) { return cuda_emulation::shared_offset(p); }

inline void cp_async_16(uint32_t dst, const void* src, bool valid) { cuda_emulation::async_copy(dst, src, 16, valid); }
inline void cp_async_4(uint32_t dst, const void* src, bool valid) { cuda_emulation::async_copy(dst, src, 4, valid); }
inline void cp_async_commit() { cuda_emulation::async_commit(); }
template <int N>
inline void cp_async_wait() {
  cuda_emulation::async_wait(N);
}

inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { emulated::ldmatrix(r, addr, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { emulated::ldmatrix(r, addr, true); }

// The 16x16 A and 16x8 B fragments gathered from the warp, the lane's four C elements accumulated in double and
// rounded once: the tensor core's f32 accumulation is at least that close to exact.
template <class Elem>
inline void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
  const auto* all = reinterpret_cast<const uint32_t*>(cuda_emulation::warp_exchange(mine, sizeof mine, emulated::kMma));
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const uint32_t* s = all + l * 8;
    const int g = l / 4, t = l % 4;
    for (int h = 0; h < 2; ++h) {
      auto half = [&](uint32_t x) { return emulated::widen<Elem>(uint16_t(h ? x >> 16 : x & 0xffff)); };
      A[g][2 * t + h] = half(s[0]);
      A[g + 8][2 * t + h] = half(s[1]);
      A[g][2 * t + 8 + h] = half(s[2]);
      A[g + 8][2 * t + 8 + h] = half(s[3]);
      B[2 * t + h][g] = half(s[4]);
      B[2 * t + 8 + h][g] = half(s[5]);
    }
  }
  const int lane = cuda_emulation::thread_index() % 32, g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    double sum = c[e];
    for (int k = 0; k < 16; ++k) sum += double(A[row][k]) * double(B[k][col]);
    c[e] = float(sum);
  }
}

inline float exp2_approx(float x) { return std::exp2(x); }

inline float shfl_xor(float v, int mask) {
  const auto* all = reinterpret_cast<const float*>(cuda_emulation::warp_exchange(&v, 4, emulated::kShuffle));
  return all[((cuda_emulation::thread_index() % 32) ^ mask) * 8];
}

template <class Elem>
inline uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return uint32_t(v.x.bits) | (uint32_t(v.y.bits) << 16);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return uint32_t(v.x) | (uint32_t(v.y) << 16);
  }
}

template <class Out>
inline void store1(Out* dst, float x) {
  cuda_emulation::check_global(dst, sizeof(Out), "store");
  if constexpr (std::is_same_v<Out, float>) *dst = x;
  else if constexpr (std::is_same_v<Out, __nv_bfloat16>) *dst = __float2bfloat16_rn(x);
  else *dst = __float2half_rn(x);
}

template <class Out>
inline void store2(Out* dst, float x0, float x1) {
  if (reinterpret_cast<uintptr_t>(dst) % (2 * sizeof(Out))) cuda_emulation::fail("paired store to misaligned %p", (void*)dst);
  store1(dst, x0);
  store1(dst + 1, x1);
}

inline void sync_threads() { __syncthreads(); }
inline int thread_index() { return cuda_emulation::thread_index(); }

}  // namespace attnzoo::sm80
