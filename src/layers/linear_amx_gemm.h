#pragma once
// The bf16-products projection on AMX tiles (linear_bf16_gemm.cc takes it where amx_bf16_enabled()), oriented so
// that nothing of W is copied: W's rows, already bf16 pairs, are the A operand read where they lie, and the
// activations, transposed once per call, are the B operand. Each 32 x 32 block of y^T is accumulated over the
// whole reduction in the tile registers, starting from the bias, and transposed into y through an L1 buffer.
#include <cstddef>
#include <cstdint>

namespace attnzoo {

// Tokens per group of the transposed activations: two B tiles of 16 columns.
constexpr size_t kAmxTokenGroup = 32;

// The activations as B: x [T][K2] pairs -> [ceil(T / 32)][K2p][32] pairs, zero past token T and past pair K2
// (K2p: K2 rounded up to 16). dst holds groups(T) * K2p * 32 pairs.
void amx_transpose_activations(const uint32_t* x, size_t T, size_t K2, uint32_t* dst);
inline size_t amx_token_groups(size_t T) { return (T + kAmxTokenGroup - 1) / kAmxTokenGroup; }
inline size_t amx_padded_pairs(size_t K2) { return (K2 + 15) / 16 * 16; }

// y[t * ldy + r] = bias[r] + sum_k w[r][k] . xt(t)[k] for r < rows, t < T, in bf16 pair products with f32
// accumulation (bf16_pair_gemm's products, added in the same order). w: rows of K2p pairs, ldw apart (pairs past
// the real reduction must be zero or finite: they meet xt's zeros); xt from amx_transpose_activations; bias may be
// null. Only where amx_bf16_enabled(); loads the tile configuration it needs, whatever the thread's was.
void amx_linear_rows(const uint32_t* w, size_t ldw, size_t rows, size_t K2p, const uint32_t* xt, size_t T,
                     const float* bias, float* y, size_t ldy);

}  // namespace attnzoo
