#pragma once
// Block-quantized weights in llama.cpp's GGUF formats: dequantization to f32 and products with f32 activations.
//
// A weight matrix is N rows of K elements, each row a run of whole blocks (core/quant_type.h gives the block
// sizes). Every format has a plain scalar definition (dequant_reference.cc, readable, the one the tests trust)
// and a per-target vectorised path (dequant.cc). The products:
//  - quant_gemv_f32 (decode, T <= 8 per pass; what Linear runs under matmul precision "highest"): each block
//    decoded in registers and multiplied with the f32 activations by FMAs, rows split over the thread pool.
//  - quant_gemv (decode with reduced products: matmul precision "auto", the default, or "medium"): the
//    activation rows are quantized once to 8-bit blocks as llama.cpp does and each weight row is dotted in
//    integers (int16 pair products or VNNI, f32 scale per sub-block); F32 / F16 / BF16 go to quant_gemv_f32.
//  - prefill goes through Linear's GEMM with panels dequantized to f32 (dequantize_rows), or rounded to bf16
//    pairs where products may be reduced.
#include <cstdint>
#include <span>
#include <string>

#include "core/quant_type.h"

namespace attnzoo {

// [rows, cols] of `type`, row-major, rows contiguous (row r starts at r * row_bytes). Borrowed memory.
// row_group 16: the same bytes regrouped 16 rows at a time for the VNNI / AVX2 decode rows (row_groups.h); row() is
// then meaningless and single rows come from row_of_group.
struct QuantMatrix {
  const void* data = nullptr;
  QuantType type = QuantType::F32;
  int64_t rows = 0, cols = 0;
  int64_t row_bytes = 0;
  int64_t row_group = 0;

  uint64_t bytes() const { return uint64_t(rows) * uint64_t(row_bytes); }
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
};

// Formats the kernels compute with: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, MXFP4, IQ4_NL, IQ4_XS.
bool quant_supported(QuantType t);

// Validates and describes `nbytes` bytes as a [rows, cols] matrix of `type`; ArgumentError naming `name` when the
// type is unsupported, cols is not a whole number of blocks, or the bytes are fewer than the shape needs.
QuantMatrix make_quant_matrix(const void* data, uint64_t nbytes, QuantType type, int64_t rows, int64_t cols,
                              const std::string& name);

// n elements (a whole number of blocks) from `src` to f32. The reference is the plain definition; the other
// runs the active target's kernel and gives bit-identical results (same f32 operations, no fused multiply-add).
void dequantize_row_reference(QuantType type, const void* src, float* dst, int64_t n);
void dequantize_row(QuantType type, const void* src, float* dst, int64_t n);
// Rows [r0, r0 + nr) of w into dst [nr, cols].
void dequantize_rows(const QuantMatrix& w, int64_t r0, int64_t nr, float* dst);

// y[t, n] = sum_k x[t, k] w[n, k] (+ bias[n]) for t < T; x [T, cols] contiguous, y rows ldy apart.
// quant_gemv uses integer dot products where the format has them (quant_gemv_has_int8) and the f32 path else.
void quant_gemv(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy);
void quant_gemv_f32(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy);
bool quant_gemv_has_int8(QuantType type);
// quant_gemv of several matrices over the same x [T, cols] (q / k / v, gate / up): where every one has integer rows,
// x is quantized once (the arrays every matrix's rows read: the 8-bit values are the same for all) and the rows of
// all of them (panels times token runs past 8 tokens), each matrix on its own route (Q5_0's AVX2 rows beside
// Q4_0's VNNI ones), are split over the pool in one dispatch; else quant_gemv one by one. Each y is bit for bit what
// quant_gemv writes.
struct QuantGemvOutput {
  const QuantMatrix* w;
  const float* bias;
  float* y;  // [T, ldy]
  int64_t ldy;
};
void quant_gemv_shared(std::span<const QuantGemvOutput> outs, const float* x, int64_t T);
// Activation quantizations (8-bit rows of x) quant_gemv / quant_gemv_shared ran in this process: what tests
// observe of the sharing.
uint64_t quant_gemv_quantizations();
// Double accumulation over the reference-dequantized weights, for tests.
void quant_matmul_reference(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y,
                            int64_t ldy);

}  // namespace attnzoo
