#pragma once
// What the step kernels share on the device: f32 <-> storage conversions, 16-byte packs, row addressing (rows.h)
// and warp sums. The host side picks the pack width: 16 / sizeof(T) elements when rows_vectorizable, else 1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "layers/cuda/rows.h"

namespace attnzoo::cuda_step {

template <class T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32(float v) { return v; }
template <> __device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

// Round to nearest even, as the CPU's store_from_f32 does.
template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f32(float v) { return __float2half_rn(v); }

// N elements moved as one unit: 16-byte accesses when N * sizeof(T) is a multiple of 16 (two for the f32 weight
// beside bf16 activations), one scalar access when N is 1.
template <class T> __device__ __forceinline__ uint32_t to_bits(T v);
template <> __device__ __forceinline__ uint32_t to_bits(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ uint32_t to_bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
template <> __device__ __forceinline__ uint32_t to_bits(__half v) { return __half_as_ushort(v); }
template <class T> __device__ __forceinline__ T from_bits(uint32_t v);
template <> __device__ __forceinline__ float from_bits(uint32_t v) { return __uint_as_float(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_bits(uint32_t v) { return __ushort_as_bfloat16(uint16_t(v)); }
template <> __device__ __forceinline__ __half from_bits(uint32_t v) { return __ushort_as_half(uint16_t(v)); }

// The vector path moves uint4 values built from the elements' bits. Stores are spelled in PTX: nvcc (13.0) split
// plain 16-byte stores into scalar ones in the element-wise kernels' grid-stride loop, aligned type or not. The
// "memory" clobber keeps a later read of the same bytes (the norm re-reading its residual row) after the store.
#if defined(ATTNZOO_CUDA_EMULATION)
// The kernel emulator's (testing/cuda_emulation): the same 16 bytes, alignment- and bounds-checked.
inline void store16(void* p, uint4 v) {
  if (reinterpret_cast<uintptr_t>(p) % 16) attnzoo::cuda_emulation::fail("store16 to misaligned %p", p);
  attnzoo::cuda_emulation::check_global(p, 16, "store16");
  std::memcpy(p, &v, 16);
}
#else
__device__ __forceinline__ void store16(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
#endif

template <int N, class T>
__device__ __forceinline__ void load(const T* p, float (&out)[N]) {
  if constexpr (N * sizeof(T) % 16 == 0) {
    constexpr int kPerWord = 4 / sizeof(T);
#pragma unroll
    for (int k = 0; k < int(N * sizeof(T) / 16); ++k) {
      const uint4 u = reinterpret_cast<const uint4*>(p)[k];
      const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int i = 0; i < 4 * kPerWord; ++i)
        out[k * 4 * kPerWord + i] = to_f32(from_bits<T>(words[i / kPerWord] >> (16 * (i % kPerWord))));
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_f32(p[i]);
  }
}

template <int N, class T>
__device__ __forceinline__ void store(T* p, const float (&in)[N]) {
  if constexpr (N * sizeof(T) % 16 == 0) {
    constexpr int kPerWord = 4 / sizeof(T);
#pragma unroll
    for (int k = 0; k < int(N * sizeof(T) / 16); ++k) {
      uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
      for (int i = 0; i < 4 * kPerWord; ++i)
        words[i / kPerWord] |= to_bits(from_f32<T>(in[k * 4 * kPerWord + i])) << (16 * (i % kPerWord));
      store16(reinterpret_cast<uint4*>(p) + k, make_uint4(words[0], words[1], words[2], words[3]));
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = from_f32<T>(in[i]);
  }
}

// The kernels' copy of Rows: row r's first element.
struct RowMap {
  int64_t count, cols, inner, outer_stride, inner_stride;
  explicit RowMap(const Rows& r)
      : count(r.count), cols(r.cols), inner(r.inner), outer_stride(r.outer_stride), inner_stride(r.inner_stride) {}
  __device__ __forceinline__ int64_t start(int64_t r) const {
    return inner == 1 ? r * outer_stride : (r / inner) * outer_stride + (r % inner) * inner_stride;
  }
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Blocks for a grid-stride loop over `items`: enough to fill any GPU, never more than the work or than grid.x
// allows.
inline unsigned grid_for(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return unsigned(blocks < 65536 ? blocks : 65536);
}

// Blocks in y for a loop over `rows` that strides by gridDim.y: one per row, never more than grid.y allows.
inline unsigned grid_rows(int64_t rows) { return unsigned(rows < 65535 ? rows : 65535); }

// Calls fn(T{}) with T the CUDA type of a float dtype (the checks have refused every other).
template <class Fn>
void with_float_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(__nv_bfloat16{});
    case DType::f16: return fn(__half{});
    default: throw DTypeError(std::string("step kernels: unexpected dtype ") + dtype_name(dtype));
  }
}

}  // namespace attnzoo::cuda_step
