#pragma once
// Decode projections on an NVIDIA GPU straight from GGUF block formats: y[m, n] = sum_k x[m, k] w[n, k] for a few
// activation rows (M <= 8: the decode batch, a speculative verify), the weight read once from memory in its own
// bytes and dequantized in registers, f32 accumulation. The twin of quant_gemv_f32 (quant.h) for the formats
// models ship in: BF16, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K. No CUDA headers here: the problem is built and
// checked in plain C++ (gemv_problem.cc), so bad input is refused before any CUDA call, on any machine.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

// A validated product: pointers already device addresses on `device`.
struct QuantGemvProblem {
  Device device;
  QuantType type = QuantType::BF16;
  int64_t M = 0, N = 0, K = 0;
  const void* w = nullptr;  // N rows of w_row_bytes (GGUF bytes, row r at r * w_row_bytes)
  int64_t w_row_bytes = 0;
  const void* x = nullptr;  // [M, K], rows x_stride elements apart
  DType x_dtype = DType::f32;
  int64_t x_stride = 0;
  void* y = nullptr;  // [M, N], rows y_stride elements apart
  DType y_dtype = DType::f32;
  int64_t y_stride = 0;
  const float* bias = nullptr;  // [N] or null
  bool accumulate = false;
};

// What the GEMV does with a row's sums, gemm_cuda's epilogue: + bias [N] (f32, contiguous, on w's device), then
// + y's own value when accumulating (the residual stream fused into an output projection), rounded to y's dtype.
struct QuantGemvEpilogue {
  const TensorView* bias = nullptr;
  bool accumulate = false;
};

constexpr int64_t kQuantGemvMaxRows = 8;  // activation rows per call

// Whether the CUDA kernels compute with `type`.
bool quant_gemv_cuda_supported(QuantType type);

// Every refusal, before any CUDA call: w's format one the kernels compute with, its rows plain GGUF rows (not
// regrouped), BF16 / F16 rows a multiple of 32 long, its data on a CUDA `w_device` and 2-byte aligned (every
// block size is even; 16-byte loads are taken where rows are whole 16-byte vectors, 4-byte ones where they are
// whole words); x float32, bfloat16 or float16 [M, K] with K = w.cols, 1 <= M <= 8 (M = 0: nothing to do),
// rows contiguous; y float32, bfloat16 or float16 [M, N], N = w.rows, rows contiguous, overlapping neither x nor
// w; bias float32 [N] contiguous; x, y and bias on w's device. ArgumentError / DTypeError naming the argument
// (w, x, y, bias).
QuantGemvProblem make_quant_gemv_cuda_problem(const QuantMatrix& w, Device w_device, const TensorView& x,
                                              const TensorView& y, const QuantGemvEpilogue& epilogue = {});

// Runs a problem make_quant_gemv_cuda_problem returned, on `stream` (defined in gemv.cu, CUDA builds only).
void quant_gemv_cuda(const QuantGemvProblem& p, Stream stream);

}  // namespace attnzoo
