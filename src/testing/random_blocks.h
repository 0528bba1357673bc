#pragma once
// Random valid rows of a GGUF weight format for the C++ tests: packed integers take any bits, and each block's
// f16 scales are set to finite N(0, 0.05) values (F32 / F16 / BF16: N(0, 1) elements).
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/quant/quant.h"

namespace attnzoo::testing {

// Byte offsets of the f16 scales inside one block of each block format.
inline std::vector<int> quant_f16_fields(QuantType t) {
  switch (t) {
    case QuantType::Q4_0: case QuantType::Q5_0: case QuantType::Q8_0: case QuantType::IQ4_NL:
    case QuantType::IQ4_XS: return {0};
    case QuantType::Q4_1: case QuantType::Q5_1: case QuantType::Q4_K: case QuantType::Q5_K: return {0, 2};
    case QuantType::Q2_K: return {80, 82};
    case QuantType::Q3_K: return {108};
    case QuantType::Q6_K: return {208};
    default: return {};
  }
}

inline std::vector<uint8_t> random_quant_rows(QuantType t, int64_t rows, int64_t cols, uint64_t seed) {
  const QuantTypeInfo info = *quant_type_info(uint32_t(t));
  std::vector<uint8_t> out(size_t(rows * *quant_row_bytes(t, cols)));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  if (!quant_is_blocked(t)) {
    const DType dt = *dtype_of(t);
    for (int64_t i = 0; i < rows * cols; ++i) store_from_f32(out.data(), dt, i, normal(rng));
    return out;
  }
  for (auto& b : out) b = uint8_t(rng());
  for (int64_t blk = 0; blk < rows * cols / info.block_elems; ++blk) {
    uint8_t* p = out.data() + blk * info.block_bytes;
    for (int off : quant_f16_fields(t)) {
      const uint16_t h = f32_to_f16(0.05f * normal(rng));
      std::memcpy(p + off, &h, 2);
    }
    if (t == QuantType::MXFP4) p[0] = uint8_t(118 + rng() % 8);  // scales 2^-10 .. 2^-3
  }
  return out;
}

// Blocks 0, 7 and 14 of random_quant_rows' bytes given the f16 extremes as scales: the largest finite, the smallest
// subnormal, a negative one. Q6_K's int8 sub-block scales there take their extremes too (127 and -128 in turn).
inline void set_extreme_scales(QuantType t, std::vector<uint8_t>& raw) {
  const QuantTypeInfo info = *quant_type_info(uint32_t(t));
  const uint16_t scales[] = {0x7BFF, 0x0001, 0xC500};
  for (size_t b = 0; b < 3; ++b) {
    uint8_t* block = raw.data() + b * 7 * info.block_bytes;
    for (int off : quant_f16_fields(t)) std::memcpy(block + off, &scales[b], 2);
    if (t == QuantType::Q6_K)
      for (int sb = 0; sb < 16; ++sb) block[192 + sb] = sb % 2 ? 0x80 : 0x7F;
  }
}

// N rows of K IQ4_NL / IQ4_XS values at their edges: block scales d at the f16 extremes (largest finite of either
// sign, the smallest and largest subnormal, both zeros, ordinary values), every IQ4_XS sub-block scale ls from 0 to
// 63 over the rows, a different one in each sub-block of a block, and every code in both nibbles of every block and
// sub-block in an order that moves with row, block and sub-block (ls of row r, block b, sub-block j:
// (5 r + 8 b + 7 j) % 64). So a wrong grid entry, a swapped nibble half or sub-block, a misread scale field or a
// misplaced row changes a value.
inline std::vector<uint8_t> iq4_edge_rows(QuantType t, int64_t N, int64_t K) {
  const uint16_t ds[] = {0x7BFF, 0xFBFF, 0x0001, 0x03FF, 0x8001, 0x0000, 0x8000, 0x3C00, 0xB555, 0x2E66, 0x0400};
  const int64_t nds = int64_t(sizeof(ds) / sizeof(ds[0]));
  const bool xs = t == QuantType::IQ4_XS;
  const QuantTypeInfo info = *quant_type_info(uint32_t(t));
  std::vector<uint8_t> raw = random_quant_rows(t, N, K, 5);
  const int64_t nb = K / info.block_elems;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* block = raw.data() + (r * nb + b) * info.block_bytes;
      std::memcpy(block, &ds[(r * nb + b) % nds], 2);
      uint8_t* qs = block + (xs ? 8 : 2);
      if (xs) std::memset(block + 2, 0, 6);
      for (int64_t j = 0; j < (xs ? 8 : 1); ++j) {
        if (xs) {
          const int ls = int((r * 5 + b * 8 + j * 7) % 64);
          block[4 + j / 2] |= uint8_t((ls & 0xF) << (4 * (j % 2)));
          const uint16_t h = uint16_t(block[2] | block[3] << 8) | uint16_t((ls >> 4) << (2 * j));
          block[2] = uint8_t(h);
          block[3] = uint8_t(h >> 8);
        }
        for (int64_t l = 0; l < 16; ++l)
          qs[16 * j + l] = uint8_t(((l + r + j) % 16) | ((15 - l + 3 * b + j) % 16) << 4);
      }
    }
  return raw;
}

}  // namespace attnzoo::testing
