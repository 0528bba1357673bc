#pragma once
// The device side of the embedding gather (embedding.cu launches it; embedding_cuda.h has the contract): one warp
// per token, lanes striding over the row's elements. Each element is decoded on its own from its block, by the
// operations of kernels/quant/dequant_reference.cc in its order; products go through __fmul_rn so nvcc cannot fuse
// Q4_K's d * q - m into an FMA the CPU does not do. A row is a few kilobytes, so the redundant per-element reads of
// a block's scales come from L1 and cost nothing next to the gather itself.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/quant_type.h"

namespace attnzoo::cuda_embedding {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <class Out>
struct EmbedParams {
  const uint8_t* table;
  int64_t row_bytes, vocab, dim;
  const int32_t* ids;  // [tokens], on the device
  int64_t tokens;
  Out* out;
  int64_t out_stride;  // elements between output rows
  float scale;
  unsigned long long* first_bad;  // the lowest token whose id is outside [0, vocab); starts at ~0ull
};

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

template <QuantType kType>
__device__ __forceinline__ float element(const uint8_t* row, int64_t i) {
  if constexpr (kType == QuantType::F32) {
    return __uint_as_float(uint32_t(row[4 * i]) | uint32_t(row[4 * i + 1]) << 8 | uint32_t(row[4 * i + 2]) << 16 |
                           uint32_t(row[4 * i + 3]) << 24);
  } else if constexpr (kType == QuantType::F16) {
    return f16_at(row + 2 * i);
  } else if constexpr (kType == QuantType::BF16) {
    return __uint_as_float((uint32_t(row[2 * i]) | uint32_t(row[2 * i + 1]) << 8) << 16);
  } else if constexpr (kType == QuantType::Q8_0) {  // d, qs[32]
    const uint8_t* b = row + (i / 32) * 34;
    return __fmul_rn(f16_at(b), float(int8_t(b[2 + i % 32])));
  } else if constexpr (kType == QuantType::Q4_0) {  // d, qs[16]: element j in the low nibble of j, j + 16 high
    const uint8_t* b = row + (i / 32) * 18;
    const int j = int(i % 32);
    const int q = j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4;
    return __fmul_rn(f16_at(b), float(q - 8));
  } else if constexpr (kType == QuantType::Q4_K) {  // d, dmin, scales[12], qs[128]
    const uint8_t* b = row + (i / 256) * 144;
    const int e = int(i % 256), j = e / 32, l = e % 32;
    const uint8_t* s = b + 4;
    const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    const int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    const float dl = __fmul_rn(f16_at(b), float(sc)), ml = __fmul_rn(f16_at(b + 2), float(mn));
    const int q = (b[16 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
    return __fsub_rn(__fmul_rn(dl, float(q)), ml);
  } else {
    static_assert(kType == QuantType::Q6_K, "embedding_type_supported_cuda lists the formats");
    const uint8_t* b = row + (i / 256) * 210;  // ql[128], qh[64], scales[16], d
    const int e = int(i % 256), half = e / 128, p = e % 128;
    const int lo = (b[half * 64 + p % 64] >> (4 * (p / 64))) & 0xF;
    const int hi = (b[128 + half * 32 + p % 32] >> (2 * (p / 32))) & 3;
    return __fmul_rn(__fmul_rn(f16_at(b + 208), float(int8_t(b[192 + e / 16]))), float((lo | (hi << 4)) - 32));
  }
}

template <class Out> __device__ __forceinline__ Out narrow(float v);
template <> __device__ __forceinline__ float narrow(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 narrow(float v) { return __float2bfloat16_rn(v); }

template <QuantType kType, class Out>
__device__ __forceinline__ void gather_rows(const EmbedParams<Out>& p) {
  const int lane = int(threadIdx.x) % 32;
  for (int64_t t = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; t < p.tokens; t += int64_t(gridDim.x) * kWarps) {
    const int32_t id = p.ids[t];
    Out* out = p.out + t * p.out_stride;
    if (id < 0 || id >= p.vocab) {
      if (lane == 0) atomicMin(p.first_bad, (unsigned long long)t);
      for (int64_t i = lane; i < p.dim; i += 32) out[i] = narrow<Out>(__uint_as_float(0x7fc00000u));
      continue;
    }
    const uint8_t* row = p.table + int64_t(id) * p.row_bytes;
    for (int64_t i = lane; i < p.dim; i += 32) out[i] = narrow<Out>(__fmul_rn(element<kType>(row, i), p.scale));
  }
}

inline unsigned grid_for(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return unsigned(blocks < 65536 ? blocks : 65536);
}

}  // namespace attnzoo::cuda_embedding
