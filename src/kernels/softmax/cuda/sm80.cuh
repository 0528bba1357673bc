#pragma once
// The sm_80 instructions the CUDA softmax kernels (prefill and decode) are written in: cp.async, ldmatrix,
// mma.sync m16n8k16, ex2.approx, shuffles, paired stores. Inline PTX and intrinsics only, kept apart from the
// kernels' logic (the kernel emulator replaces exactly this file, see below). Everything here
// runs on sm_80 and later GPUs.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A 16x16 row-major: a0 (row g, cols 2t..2t+1), a1 (row g+8, same cols), a2 (row g, cols 2t+8..), a3 (g+8, 2t+8..)
//   B 16x8 "col":      b0 (k rows 2t..2t+1, col g), b1 (k rows 2t+8..2t+9, col g)
//   C 16x8:            c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 reads four 8x8 b16 matrices whose row addresses come from lanes 0-7, 8-15, 16-23, 24-31; register
// i receives matrix i with lane holding row g, elements 2t..2t+1 (with .trans: column g, rows 2t..2t+1).
#if defined(ATTNZOO_CUDA_EMULATION)
// The kernel emulator's host versions of everything below (testing/cuda_emulation, the test_cuda_emulation
// binary): the seam that lets the tile code run, unchanged, on a CPU.
#include "kernels/softmax/cuda/sm80_emulated.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace attnzoo::sm80 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes global -> shared, bypassing L1 (the cache is streamed once). `valid` false writes 16 zero bytes and
// reads nothing (src-size 0): keys past the chunk become zeros without touching memory past the sequence.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
// 4 bytes (one f32 scale); only .ca exists for sizes below 16.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a * b for one 16x16 (A) by 16x8 (B) step, f32 accumulators.
template <class Elem>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 2^x; ex2.approx(-inf) is +0, which is what masked scores need.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

// Two floats rounded into one register of Elem pairs, `lo` in the low half (the lower column of a fragment).
template <class Elem>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

template <class Out>
__device__ __forceinline__ void store2(Out* dst, float x0, float x1) {
  if constexpr (std::is_same_v<Out, float>) {
    *reinterpret_cast<float2*>(dst) = make_float2(x0, x1);
  } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(x0, x1);
  } else {
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(x0, x1);
  }
}

template <class Out>
__device__ __forceinline__ void store1(Out* dst, float x) {
  if constexpr (std::is_same_v<Out, float>) {
    *dst = x;
  } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    *dst = __float2bfloat16_rn(x);
  } else {
    *dst = __float2half_rn(x);
  }
}

// Named so a host emulator of the tile code can stand in for the barrier and the thread index.
__device__ __forceinline__ void sync_threads() { __syncthreads(); }
__device__ __forceinline__ int thread_index() { return int(threadIdx.x); }

}  // namespace attnzoo::sm80

#endif  // ATTNZOO_CUDA_EMULATION
