#pragma once
// How the step kernels see a tensor: rows of `cols` contiguous elements, addressed by up to two strides, so one
// kernel serves a plain [T, n] activation, a slice of a wider row (q out of a fused qkv projection, the gate half of
// a [T, 2I] gate_up) and the heads of every token ([T, H, D] with a token stride). Host-side only; the .cu files
// pass it to the kernels by value.
#include <cstdint>

#include "core/float_dtype.h"  // require_float_dtype, which these kernels' checks use
#include "core/tensor.h"

namespace attnzoo {

struct Rows {
  int64_t count = 0;         // rows
  int64_t cols = 0;          // contiguous elements per row
  int64_t inner = 1;         // rows per outer step: row r starts at (r / inner) * outer_stride + (r % inner) * inner_stride
  int64_t outer_stride = 0;  // elements
  int64_t inner_stride = 0;  // elements
};

// The rows of `t`: 1-D (one row), 2-D [rows, cols], 3-D [outer, inner, cols] with any non-negative strides and a
// unit last stride, or a contiguous tensor of any rank (leading dimensions flattened). ArgumentError naming `name`.
Rows rows_of(const TensorView& t, const char* name);

// Whether 16-byte loads of `elem_bytes`-sized elements can serve every row: `data` 16-byte aligned and every row
// start and row length a whole number of 16-byte vectors.
bool rows_vectorizable(const Rows& r, const void* data, size_t elem_bytes);

// ArgumentError naming `name` unless `t` is device memory of a CUDA device (and of `device` when given: every
// operand of one launch must live on the GPU that runs it).
void require_cuda_tensor(const TensorView& t, const char* name, const Device* device = nullptr);

// The refusals of a float32 [rows, cols] matrix on a CUDA device (of `device` when given) with a contiguous last
// dimension and rows that do not overlap: what the row copy and the transpose read and write.
void require_f32_matrix(const TensorView& t, const char* name, const Device* device);

}  // namespace attnzoo
