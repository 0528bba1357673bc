#pragma once
// Loads and stores of the linear families' float dtypes on the device, chosen at run time: the inputs of a token
// are a few hundred bytes beside the tens of kilobytes of state a head moves, so a uniform switch per element
// costs nothing measurable and spares a kernel per dtype combination (q, k, v, the gates and o may all differ).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.h"

namespace attnzoo::cuda_linear {

// An element's bits (an f32's 32, a bf16's or f16's 16, zero-extended) and their value. A kernel that loads the
// bits of all of a token's inputs before it converts any keeps those loads in flight together; load_elem, which
// converts at once, makes the thread wait on each load where the conversion sits (inside the branch of a bounds
// test, usually), so its next load leaves a whole latency later.
__device__ __forceinline__ uint32_t load_bits(const void* base, Elem t, int64_t i) {
  return t == Elem::f32 ? static_cast<const uint32_t*>(base)[i] : static_cast<const uint16_t*>(base)[i];
}

__device__ __forceinline__ float bits_to_float(uint32_t bits, Elem t) {
  switch (t) {
    case Elem::bf16: return __uint_as_float(bits << 16);
    case Elem::f16: return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    default: return __uint_as_float(bits);
  }
}

__device__ __forceinline__ float load_elem(const void* base, Elem t, int64_t i) {
  switch (t) {
    case Elem::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case Elem::f16: return __half2float(static_cast<const __half*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

__device__ __forceinline__ void store_elem(void* base, Elem t, int64_t i, float x) {
  switch (t) {
    case Elem::bf16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(x); break;
    case Elem::f16: static_cast<__half*>(base)[i] = __float2half_rn(x); break;
    default: static_cast<float*>(base)[i] = x; break;
  }
}

}  // namespace attnzoo::cuda_linear
