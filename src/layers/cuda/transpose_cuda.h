#pragma once
// Transposing f32 rows on an NVIDIA GPU: dst [cols, rows] = src [rows, cols] transposed, each side with a unit last
// stride and any row stride (so src may be a column slice of wider rows). The GPU runner's Mamba-1 mixer
// (models/cuda/device_mamba.*) turns its token-major activations into the selective scan's channel-major layout
// and the scan's output back. No CUDA headers here.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

struct Transpose {
  TensorView src;  // f32 [rows, cols]
  TensorView dst;  // f32 [cols, rows], written; must not overlap src
};
// ArgumentError / DTypeError naming the argument.
void check_transpose_cuda(const Transpose& t);
// The launcher (transpose.cu, CUDA builds only) checks first, then runs on the tensors' device.
void transpose_cuda(const Transpose& t, Stream stream = current_stream());

}  // namespace attnzoo
