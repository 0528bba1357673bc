// The definition of every supported weight format, one block at a time, as llama.cpp lays the blocks out
// (ggml-common.h) and as gguf-py dequantizes them: each value is produced by the same f32 operations in the same
// order (a scale times an integer, then an offset subtracted or added), so results are bit-identical.
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quant_blocks.h"

namespace attnzoo {
namespace {

void q4_0(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int(qs[j] & 0xF) - 8);
    y[j + 16] = d * float(int(qs[j] >> 4) - 8);
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b)), m = f16_to_f32(load_u16(b + 2));
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(qs[j] & 0xF) + m;
    y[j + 16] = d * float(qs[j] >> 4) + m;
  }
}

// The fifth bit of element j is bit j of the little-endian 32-bit qh.
void q5_0(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  const uint32_t qh = load_u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = int((qs[j] & 0xF) | (((qh >> j) & 1) << 4));
    const int hi = int((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    y[j] = d * float(lo - 16);
    y[j + 16] = d * float(hi - 16);
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b)), m = f16_to_f32(load_u16(b + 2));
  const uint32_t qh = load_u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) + m;
    y[j + 16] = d * float((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) + m;
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  for (int j = 0; j < 32; ++j) y[j] = d * float(int8_t(b[2 + j]));
}

// scales[16] (low nibble: scale, high: min, per 16 elements), qs[64] (2 bits; byte l of each 32-byte half holds
// elements l, l+32, l+64, l+96 of that half), d, dmin.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = f16_to_f32(load_u16(b + 80)), dmin = f16_to_f32(load_u16(b + 82));
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
    const int q = (qs[half * 32 + l] >> shift) & 3;
    const uint8_t sc = scales[e / 16];
    const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
    y[e] = dl * float(q) - ml;
  }
}

// hmask[32] (bit b of byte l: high bit of element 32 b + l; a clear bit subtracts 4), qs[64] (low 2 bits, laid
// out as in Q2_K), scales[12] (16 six-bit scales biased by 32), d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = f16_to_f32(load_u16(b + 108));
  for (int e = 0; e < 256; ++e) {
    const int s = e / 16;
    const int lo4 = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    const int hi2 = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * float((lo4 | (hi2 << 4)) - 32);
    const int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
    const int ql = (qs[half * 32 + l] >> shift) & 3;
    const int hbit = (hmask[l] >> (e / 32)) & 1;
    y[e] = dl * float(ql - (hbit ? 0 : 4));
  }
}

// d, dmin, scales[12] (eight 6-bit scales and mins, k_scale_min), qs[128] (byte l of chunk c holds element l of
// sub-block 2c in its low nibble and of sub-block 2c+1 in its high nibble).
void q4_k(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b)), dmin = f16_to_f32(load_u16(b + 2));
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    const KScaleMin sm = k_scale_min(b + 4, j);
    const float dl = d * float(sm.scale), ml = dmin * float(sm.min);
    for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * float((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) - ml;
  }
}

// As Q4_K plus qh[32]: bit j of byte l is the fifth bit of element l of sub-block j.
void q5_k(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b)), dmin = f16_to_f32(load_u16(b + 2));
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    const KScaleMin sm = k_scale_min(b + 4, j);
    const float dl = d * float(sm.scale), ml = dmin * float(sm.min);
    for (int l = 0; l < 32; ++l) {
      const int q = ((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) | (((qh[l] >> j) & 1) << 4);
      y[32 * j + l] = dl * float(q) - ml;
    }
  }
}

// ql[128] (low 4 bits: byte m of each 64-byte half holds element m and m+64 of that half), qh[64] (high 2 bits,
// laid out as Q2_K's qs), int8 scales[16], d. Values are biased by 32.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_to_f32(load_u16(b + 208));
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, p = e % 128;
    const int lo = (ql[half * 64 + p % 64] >> (4 * (p / 64))) & 0xF;
    const int hi = (qh[half * 32 + p % 32] >> (2 * (p / 32))) & 3;
    y[e] = d * float(scales[e / 16]) * float((lo | (hi << 4)) - 32);
  }
}

// e (an E8M0 power of two, stored halved since the table is doubled), qs[16] (E2M1 codes, nibbles as Q4_0).
void mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_to_f32_half(b[0]);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kMxfp4Values[b[1 + j] & 0xF]);
    y[j + 16] = d * float(kMxfp4Values[b[1 + j] >> 4]);
  }
}

// d, qs[16] (nibbles as Q4_0) through the IQ4 grid.
void iq4_nl(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIq4Values[b[2 + j] & 0xF]);
    y[j + 16] = d * float(kIq4Values[b[2 + j] >> 4]);
  }
}

// d, scales_h, scales_l[4] (eight 6-bit sub-block scales, iq4_xs_scale), qs[128]: sub-block j's 32 codes in bytes
// 16 j .. 16 j + 15, nibbles as IQ4_NL. The sub-block scale d (ls - 32) is formed first, as gguf-py and llama.cpp do.
void iq4_xs(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j) {
    const float dl = d * float(iq4_xs_scale(b, j));
    for (int l = 0; l < 16; ++l) {
      y[32 * j + l] = dl * float(kIq4Values[qs[16 * j + l] & 0xF]);
      y[32 * j + 16 + l] = dl * float(kIq4Values[qs[16 * j + l] >> 4]);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(QuantType t) {
  switch (t) {
    case QuantType::Q4_0: return q4_0;
    case QuantType::Q4_1: return q4_1;
    case QuantType::Q5_0: return q5_0;
    case QuantType::Q5_1: return q5_1;
    case QuantType::Q8_0: return q8_0;
    case QuantType::Q2_K: return q2_k;
    case QuantType::Q3_K: return q3_k;
    case QuantType::Q4_K: return q4_k;
    case QuantType::Q5_K: return q5_k;
    case QuantType::Q6_K: return q6_k;
    case QuantType::MXFP4: return mxfp4;
    case QuantType::IQ4_NL: return iq4_nl;
    case QuantType::IQ4_XS: return iq4_xs;
    default: return nullptr;
  }
}

}  // namespace

void dequantize_row_reference(QuantType type, const void* src, float* dst, int64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case QuantType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case QuantType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(p + 2 * i));
      return;
    case QuantType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(p + 2 * i));
      return;
    default: break;
  }
  const BlockFn fn = block_fn(type);
  require(fn != nullptr, "type", std::string("no dequantization for ") + quant_type_name(type));
  const QuantTypeInfo info = *quant_type_info(uint32_t(type));
  for (int64_t i = 0; i < n / info.block_elems; ++i) fn(p + i * info.block_bytes, dst + i * info.block_elems);
}

}  // namespace attnzoo
