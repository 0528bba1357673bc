#pragma once
// Block-scaled float8 e4m3 weights (the DeepSeek-V3 / Qwen3-FP8 release form): config.json's quantization_config
// {quant_method: "fp8", weight_block_size: [br, bc]}, each quantized weight W [rows, cols] stored as F8_E4M3 beside
// W_scale_inv, f32 [ceil(rows / br), ceil(cols / bc)]; the value is fp8(W[i, j]) * scale_inv[i / br, j / bc]
// (DeepSeek's weight_dequant). ModelFiles checks the scales when it opens the directory and dequantizes each
// weight into the checkpoint's dtype when it is first read, so every builder reads plain weights.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "loader/config.h"

namespace attnzoo {

struct Fp8Blocks {
  int64_t rows = 128, cols = 128;
};

// The block size quantization_config gives ([128, 128] without one). LoadError naming the key for a
// quant_method other than fp8 or a weight_block_size that is not two positive sizes.
Fp8Blocks read_fp8_blocks(const Config& c);

// The [ceil(rows / b.rows), ceil(cols / b.cols)] shape W_scale_inv must have.
std::vector<int64_t> fp8_scale_shape(int64_t rows, int64_t cols, Fp8Blocks b);

// W [rows, cols] (e4m3 bytes) times its block scales (f32, fp8_scale_shape) into `out` as `to` (f32, bf16 or
// f16), rounded once from the f32 product.
void dequantize_fp8_blocks(const uint8_t* w, const float* scale_inv, int64_t rows, int64_t cols, Fp8Blocks b, DType to,
                           uint8_t* out);

}  // namespace attnzoo
