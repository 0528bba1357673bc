#pragma once
// bf16 tile products with f32 accumulation, on AMX tiles (core/amx.h) where the CPU has them, else on
// AVX-512-BF16 (vdpbf16ps: 32 bf16 pairs per instruction). Operands are packed in bf16 *pairs* along the
// reduction dimension (one uint32 per pair), which is also the layout AMX tiles multiply:
//   A: [M][K/2] pairs (row-major, lda in pairs);
//   B: [K/2][N] pairs (row-major, ldb in pairs), N a multiple of 16.
// C[M x N] (+)= A * B in f32. Only call after bf16_dot_enabled() or amx_bf16_enabled() said the CPU can.
// The two paths differ in the order they add a row's products (last bits), so one process takes one of them
// for every call: a token's result does not depend on how many rows were multiplied beside it.
#include <cstddef>
#include <cstdint>

namespace attnzoo {

void bf16_pair_gemm(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B, size_t ldb,
                    float* C, size_t ldc, bool accumulate);
// The two paths, for tests and benchmarks that compare them: vdpbf16ps (needs bf16_dot_available()) and AMX
// tiles (needs amx_bf16_enabled()).
void bf16_pair_gemm_dot(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B,
                        size_t ldb, float* C, size_t ldc, bool accumulate);
void bf16_pair_gemm_amx(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B,
                        size_t ldb, float* C, size_t ldc, bool accumulate);

// dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols: a [rows][cols] matrix of pairs becomes the
// [cols][rows] operand B above. dst rows are padded with zeros to a multiple of 16 columns. 16x16 blocks are
// transposed in registers, edges gathered, so every write is a whole cache line (a plain strided scatter thrashed
// L1 and cost more than the GEMM it fed). ld_src * 16 must fit in int32.
void transpose_pairs(const uint32_t* src, size_t ld_src, size_t rows, size_t cols, uint32_t* dst, size_t ld_dst);

// Packs n f32 values into bf16 pairs (round to nearest even); n may be odd (the last pair's high half is zero).
void pack_f32_to_bf16_pairs(const float* src, size_t n, uint32_t* dst);

}  // namespace attnzoo
