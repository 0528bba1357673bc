#pragma once
// GGUF blocks expanded to bf16 on an NVIDIA GPU, for the products the GEMV (gemv_cuda.h) does not take: a step of
// more than 8 rows multiplies a dequantized panel of w with gemm_cuda. Each weight is dequant_reference's f32
// value (the same operations, gemv_formats.cuh) rounded to nearest-even bf16, so the panel is bit for bit what
// the host's dequantize_row_reference then f32_to_bf16 would give. No CUDA headers here: the problem is built
// and checked in plain C++ (dequant_problem.cc), on any machine.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

// A validated expansion: pointers already device addresses on `device`.
struct QuantDequantProblem {
  Device device;
  QuantType type = QuantType::Q8_0;
  int64_t rows = 0, cols = 0;
  const void* w = nullptr;  // rows of w_row_bytes GGUF bytes
  int64_t w_row_bytes = 0;
  void* y = nullptr;  // bf16 [rows, cols], contiguous
};

// The block formats the kernel expands: Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K (the GEMV's less the 16-bit ones,
// which gemm_cuda reads as they are).
bool quant_dequant_cuda_supported(QuantType type);

// Every refusal, before any CUDA call: w's format one above, plain GGUF rows (not regrouped), its data on a CUDA
// `w_device` and aligned to 4 bytes (2 for blocks of 18, 34 or 210 bytes), row_bytes the format's; y bfloat16 [w.rows, w.cols] contiguous on w's device,
// 4-byte aligned, not overlapping w. ArgumentError / DTypeError naming the argument (w, y).
QuantDequantProblem make_quant_dequant_cuda_problem(const QuantMatrix& w, Device w_device, const TensorView& y);

// Runs a problem make_quant_dequant_cuda_problem returned, on `stream` (dequant.cu, CUDA builds only).
void quant_dequant_cuda(const QuantDequantProblem& p, Stream stream);

}  // namespace attnzoo
