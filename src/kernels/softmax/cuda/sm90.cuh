#pragma once
// The sm_90a (Hopper) instructions the CUDA prefill's Hopper path is written in: wgmma.mma_async and its fence /
// commit / wait, mbarriers, TMA tensor copies (cp.async.bulk.tensor), named barriers (bar.sync / bar.arrive) and
// setmaxnreg. Inline PTX only, kept apart from the kernel's logic as sm80.cuh is: the kernel emulator replaces
// exactly this file (sm90_emulated.h) so the tile code runs unchanged on a CPU.
//
// wgmma m64nNk16 (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), a warpgroup of 4 warps;
// warp w of the group owns rows 16w..16w+15, g = lane / 4, t = lane % 4:
//   D (f32, N/2 registers as d[N/8][4]): d[j][0..1] row g, cols 8j+2t, 8j+2t+1; d[j][2..3] row g+8, same cols.
//     That is mma.m16n8k16's C fragment once per 8 columns, so sm80's online-softmax helpers read it as is.
//   A in registers (RS, 4 x b32 of two 16-bit values): mma.m16n8k16's A fragment of the warp's 16 rows:
//     a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..).
//   A and B in shared memory through 64-bit descriptors (smem_descriptor below), 128-byte swizzle only here:
//     K-major (the operand's K contiguous): rows of 64 elements at 128-byte pitch, 8-row groups `stride_bytes`
//       apart; one k16 step reads 32 bytes of each row, the next step starts 32 bytes further.
//     MN-major (B with trans-b = 1, its N contiguous): K rows of 64 N-elements at 128-byte pitch, 8-row groups
//       `stride_bytes` apart, the next 64 N-elements `leading_bytes` further.
//   The swizzle is on the address: 16-byte chunk bits [4, 7) XOR row bits [7, 10), so every 8-row atom starts
//   1024-byte aligned (base offset 0), the same pattern a TMA copy with 128-byte swizzle writes.
// TMA: cp.async.bulk.tensor.{2,3,4}d tile mode into a 1024-byte aligned buffer, completing on an mbarrier's
// transaction count; elements outside the tensor land as zeros.
#include <cstdint>

#include "kernels/softmax/cuda/tensor_map.h"

namespace attnzoo::sm90 {

// A shared-memory matrix descriptor with 128-byte swizzle: start address, leading and stride byte offsets
// (each >> 4 in 14 bits), base offset 0, layout type 1 in bits 62-63.
constexpr uint64_t smem_descriptor(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((leading_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((stride_bytes >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

}  // namespace attnzoo::sm90

#if defined(ATTNZOO_CUDA_EMULATION)
#include "kernels/softmax/cuda/sm90_emulated.h"
#else
#include "kernels/softmax/cuda/sm90_wgmma.cuh"

namespace attnzoo::sm90 {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Pins an accumulator's registers in place across the asynchronous wgmma: the compiler sees them rewritten
// here, so it moves no read after a wait (or write before an issue) across it.
template <int Rows>
__device__ __forceinline__ void fence_operand(float (&d)[Rows][4]) {
#pragma unroll
  for (int i = 0; i < Rows; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d (+)= A B, A 64x16 and B 16xN from shared memory; TransB 1: B MN-major. scale_d 0 overwrites d.
template <class Elem, int N, int TransB>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, int scale_d) {
  static_assert(N == 64 || N == 128 || N == 256);
  if constexpr (N == 64) wgmma_ss_n64<Elem, TransB>(d, a, b, scale_d);
  else if constexpr (N == 128) wgmma_ss_n128<Elem, TransB>(d, a, b, scale_d);
  else wgmma_ss_n256<Elem, TransB>(d, a, b, scale_d);
}
// The same with A from registers (the fragment above).
template <class Elem, int N, int TransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, int scale_d) {
  static_assert(N == 64 || N == 128 || N == 256);
  if constexpr (N == 64) wgmma_rs_n64<Elem, TransB>(d, a, b, scale_d);
  else if constexpr (N == 128) wgmma_rs_n128<Elem, TransB>(d, a, b, scale_d);
  else wgmma_rs_n256<Elem, TransB>(d, a, b, scale_d);
}

__device__ __forceinline__ void mbarrier_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialized barriers visible to the async proxy (TMA's complete_tx) before the CTA syncs.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Spins until the phase of this parity has completed (the first wait of a fresh barrier is on parity 0).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// A 32-bit word at a shared address: a value one thread hands others behind an mbarrier (the address a constant
// offset from one already in a register, where a generic pointer would hold two more).
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t value;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(value) : "r"(addr) : "memory");
  return value;
}

// Generic-proxy writes to shared memory made visible to the async proxy (wgmma operands, TMA stores).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// One TMA tile copy of `map`'s box at coordinates (innermost first) into shared `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TensorMap& map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const TensorMap& map, int c0, int c1, int c2,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const TensorMap& map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// bar.sync with an id (1..15; 0 is __syncthreads') and a thread count: a warpgroup, or a few, sync alone.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// bar.arrive: counts towards the same barrier's thread count without waiting (the signalling side of a
// producer / consumer hand-off; the count must be the waiters' and the arrivers' together).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The warpgroup's registers per thread: the producer gives some up, the consumers take them.
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

}  // namespace attnzoo::sm90

#endif  // ATTNZOO_CUDA_EMULATION
