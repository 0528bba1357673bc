#pragma once
// Regrouped block rows (row_groups.h) decoded straight into the bf16 pairs the bf16 / AMX prefill GEMM multiplies
// (linear_bf16_gemm.cc), instead of dequantize_rows' f32 and a second pass that packs it, which took about twice
// the time for Q4_0 / Q4_K and 1.5x for Q8_0 (docs/benchmarks/cpu-classes.md, Intel).
#include <cstddef>
#include <cstdint>

#include "kernels/quant/quant.h"

namespace attnzoo {

// Rows [r0, r0 + nr) of the regrouped matrix w as bf16 pairs, row r0 + i from dst + i * stride (K / 2 pairs; the
// pairs past them are not written). Every value is dequantize_rows' f32 rounded to nearest even by
// pack_f32_to_bf16_pairs' conversion, so the pairs are bit for bit those of that route. Q4_0, Q4_1, Q8_0,
// Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS, r0 and nr multiples of 4; false (nothing written) for anything else, which
// the caller decodes through dequantize_rows. Only where the CPU has AVX-512-BF16 (bf16_dot_available(): the bf16
// GEMM's callers).
bool row_group_pairs(const QuantMatrix& w, int64_t r0, int64_t nr, uint32_t* dst, size_t stride);

}  // namespace attnzoo
