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

}  // namespace attnzoo::testing
