#pragma once
// The two routes by which the bf16 prefill GEMM (linear_bf16_gemm.cc) turns regrouped block rows into the bf16 pairs
// it multiplies: straight (row_group_pairs) or through f32 (dequantize_rows, then pack_f32_to_bf16_pairs). They
// give the same bits; the switch and the conversion alone are here for the kernel bench, which times one route
// against the other (`attnzoo bench kernels`), and for tests.
#include <cstddef>
#include <cstdint>

#include "kernels/quant/quant.h"

namespace attnzoo {

// Whether regrouped rows may go straight: on unless turned off here. Process-wide and read when a GEMM's pool task
// converts its rows, so change it between calls, on the one thread that makes them.
void linear_bf16_allow_straight_pairs(bool allow);
bool linear_bf16_straight_pairs_allowed();
// Rows [n0, n0 + nb) of w as the bf16 GEMM converts them (by the route allowed; LinearBf16GemmCounts::
// straight_pairs counts the straight ranges, and ranges off runs of four rows take the f32 route), row n0 + i from
// out + i * stride, on the calling thread. Needs bf16_dot_available(). ArgumentError naming rows / stride.
void linear_bf16_weight_pairs(const QuantMatrix& w, int64_t n0, int64_t nb, uint32_t* out, size_t stride);

}  // namespace attnzoo
