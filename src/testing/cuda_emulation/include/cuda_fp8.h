#pragma once
// Stand-in for the toolkit's cuda_fp8.h under emulation: e4m3 pairs to f16 pairs (exact: every e4m3 value is an
// f16), element 0 in the low byte.
#include <cuda_fp16.h>

#include <cstdlib>

typedef unsigned short __nv_fp8x2_storage_t;
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t kind) {
  if (kind != __NV_E4M3) std::abort();  // only e4m3 caches exist
  return {attnzoo::f32_to_f16(attnzoo::f8e4m3_to_f32(uint8_t(x & 0xff))),
          attnzoo::f32_to_f16(attnzoo::f8e4m3_to_f32(uint8_t(x >> 8)))};
}
