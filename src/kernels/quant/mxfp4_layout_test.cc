#include "kernels/quant/mxfp4_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quant/quant.h"

namespace attnzoo {
namespace {

// transformers' convert_moe_packed_tensors, one block: value 2j from byte j's low nibble, 2j + 1 from its high one,
// each an E2M1 number times 2^(exponent - 127).
std::vector<double> hf_block_values(const uint8_t* block, uint8_t exponent) {
  static const double kE2M1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  std::vector<double> out(32);
  for (int j = 0; j < 16; ++j) {
    out[size_t(2 * j)] = std::ldexp(kE2M1[block[j] & 0xF], int(exponent) - 127);
    out[size_t(2 * j + 1)] = std::ldexp(kE2M1[block[j] >> 4], int(exponent) - 127);
  }
  return out;
}

TEST(Mxfp4Layout, RepackedBlocksDequantizeToTheHuggingFaceValues) {
  const int64_t n_blocks = 40;
  std::mt19937 rng(5);
  std::vector<uint8_t> blocks(static_cast<size_t>(n_blocks * 16)), scales(static_cast<size_t>(n_blocks));
  for (auto& b : blocks) b = uint8_t(rng());
  for (auto& s : scales) s = uint8_t(100 + rng() % 50);  // 2^-27 .. 2^22: every value a normal f32
  scales[3] = 127;
  std::vector<uint8_t> gguf(size_t(n_blocks * 17));
  mxfp4_blocks_from_hf(blocks.data(), scales.data(), n_blocks, gguf.data());
  std::vector<float> got(size_t(n_blocks * 32));
  dequantize_row_reference(QuantType::MXFP4, gguf.data(), got.data(), n_blocks * 32);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::vector<double> want = hf_block_values(blocks.data() + b * 16, scales[size_t(b)]);
    for (int i = 0; i < 32; ++i) ASSERT_EQ(double(got[size_t(b * 32 + i)]), want[size_t(i)]) << b << " " << i;
  }
}

}  // namespace
}  // namespace attnzoo
