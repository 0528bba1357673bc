#pragma once
// Copying the heads of token rows between two strided 16-bit tensors, each side optionally through a row index,
// the destination's columns past the source's zero-filled: how MLA's prefill on the GPU runner
// (models/cuda/device_mla.h) gathers the paged latent rows of a context, lays the expanded K / V and the queries
// out at a head dim the softmax prefill takes (pads), broadcasts the shared rope key to every head and slices
// the output back (layers/cuda/head_rows_cuda.h is the kernel). This file is its plain twin on host memory.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

// dst[dst_row(r), h, c] = src[src_row(r), h or 0, c] for c < src.shape[2], 0 for src.shape[2] <= c < dst.shape[2],
// r < rows. src [rows', heads or 1 (one head broadcast to all), cols], dst [rows', heads, width >= cols], both
// bf16 or both f16 (the bits are copied), unit last strides, any other strides. A null index reads / writes rows
// 0..rows-1 in order; an index is int32 [rows] whose entries the caller vouches for (the pool's slots, the step's
// rows): nothing bounds them.
struct HeadRowCopy {
  TensorView src, dst;
  const int32_t* src_rows = nullptr;
  const int32_t* dst_rows = nullptr;
  int64_t rows = 0;
};

// The refusals both sides share, on `device` when given (the CUDA launcher's), ArgumentError / DTypeError naming
// the argument.
void check_head_row_copy(const HeadRowCopy& c, const Device* device);

// The twin on host memory (src, dst and the indices on the CPU).
void copy_head_rows(const HeadRowCopy& c);

}  // namespace attnzoo
