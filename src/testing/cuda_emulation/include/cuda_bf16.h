#pragma once
// Stand-in for the toolkit's cuda_bf16.h under emulation: the storage type and the conversions the kernels use,
// rounding to nearest even as the device does.
#include "core/dtype.h"
#include "testing/cuda_emulation/prelude.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat16 __float2bfloat16_rn(float a) { return {attnzoo::f32_to_bf16(a)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; }
inline float __bfloat162float(__nv_bfloat16 a) { return attnzoo::bf16_to_f32(a.bits); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 a) { return a.bits; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short a) { return {a}; }
