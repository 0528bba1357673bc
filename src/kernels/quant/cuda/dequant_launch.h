#pragma once
// The CUDA dequantization's launch, decided on the host (dequant.cu launches it; the emulator's cases run the same
// parameters through dequant_kernel.cuh).
#include <cstdint>

#include "kernels/quant/cuda/dequant_cuda.h"

namespace attnzoo::cuda_quant {

constexpr int kDequantThreads = 256;
// Enough blocks to fill any GPU many times over; a grid-stride loop covers bigger matrices.
constexpr int64_t kDequantMaxBlocks = 1 << 16;

struct DequantParams {
  const unsigned char* w;
  int64_t w_row_bytes;
  void* y;  // bf16 [rows, cols]
  int64_t rows, cols;
};

struct DequantLaunch {
  bool empty = true;
  QuantType type = QuantType::Q8_0;
  DequantParams params{};
  unsigned grid = 0;
};

DequantLaunch plan_quant_dequant(const QuantDequantProblem& p);

}  // namespace attnzoo::cuda_quant
