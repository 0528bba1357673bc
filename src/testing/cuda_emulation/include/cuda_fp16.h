#pragma once
// Stand-in for the toolkit's cuda_fp16.h under emulation. __half2 is __half2_raw here (the real types differ only
// in their member functions, which the kernels do not use), so `__half2(raw)` stays a plain copy.
#include "core/dtype.h"
#include "testing/cuda_emulation/prelude.h"

struct __half {
  uint16_t bits;
};
struct __half2_raw {
  unsigned short x, y;
};
using __half2 = __half2_raw;
inline __half __float2half_rn(float a) { return {attnzoo::f32_to_f16(a)}; }
inline __half2 __floats2half2_rn(float a, float b) { return {attnzoo::f32_to_f16(a), attnzoo::f32_to_f16(b)}; }
inline float2 __half22float2(__half2 h) { return {attnzoo::f16_to_f32(h.x), attnzoo::f16_to_f32(h.y)}; }
inline float __half2float(__half a) { return attnzoo::f16_to_f32(a.bits); }
inline unsigned short __half_as_ushort(__half a) { return a.bits; }
inline __half __ushort_as_half(unsigned short a) { return {a}; }
