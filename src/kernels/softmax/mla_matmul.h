#pragma once
// Batched products against a weight matrix read in place, for MLA's projections through kv_b_proj:
// expanding the latent into per-head keys/values (naive form), absorbing W_UK into the queries and applying
// W_UV to the latent output (absorbed form). The weight may be f32 / bf16 / f16 and is addressed through two
// strides, so both W and W^T are read without a transposed copy.
#include <cstdint>

#include "core/dtype.h"

namespace attnzoo {

// For b in [0, batch): C_b[M x N] = A_b[M x K] * B_b[K x N], with
//   A_b(m, k) = a[b * a_batch + m * lda + k]                      (f32)
//   B_b(k, n) = w[b * w_batch + k * w_k_stride + n * w_n_stride]   (w_dtype)
//   C_b(m, n) = c[b * c_batch + m * ldc + n]                       (f32, overwritten)
// All offsets are in elements.
struct WeightMatmul {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  const float* a = nullptr;
  int64_t lda = 0, a_batch = 0;
  const void* w = nullptr;
  DType w_dtype = DType::f32;
  int64_t w_k_stride = 0, w_n_stride = 0, w_batch = 0;
  float* c = nullptr;
  int64_t ldc = 0, c_batch = 0;
};

// Tile GEMM on the global thread pool: one task per (batch entry, column panel, row block); each task packs its
// panel of the weight to f32 once and streams its rows through it. Callers validate shapes.
void weight_matmul(const WeightMatmul& mm);

// The plain definition with double accumulation, for tests.
void weight_matmul_reference(const WeightMatmul& mm);

}  // namespace attnzoo
