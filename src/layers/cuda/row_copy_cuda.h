#pragma once
// Copying f32 rows on an NVIDIA GPU, each side optionally through a row index: a gather (dst row r = src row
// index[r]), a scatter (dst row index[r] = src row r) or a plain strided copy (a column slice of a wider row into a
// contiguous block). The recurrent mixers of the GPU runner (models/cuda/device_mamba2.*) use it to bring the
// batch's sequences' pool state slots into the dense [N, ...] states the scan kernels take and back, and to split a
// fused projection's columns. No CUDA headers here.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

// One copy of `rows` rows of cols = src.shape[1] floats. src and dst are f32 [rows', cols] with a unit last stride
// and any row strides, on one CUDA device. A null index reads / writes rows 0..rows-1 in order (rows must then fit
// the tensor); an index is int32 [rows] in device memory whose entries the caller vouches for (the pool's own
// slots): the kernel does not bound them. ArgumentError / DTypeError naming the argument.
struct RowCopy {
  TensorView src, dst;
  const int32_t* src_rows = nullptr;
  const int32_t* dst_rows = nullptr;
  int64_t rows = 0;
};
void check_copy_rows_cuda(const RowCopy& c);
// The launcher (row_copy.cu, CUDA builds only) checks first, then runs on the tensors' device. The rows written
// must not overlap the rows read.
void copy_rows_cuda(const RowCopy& c, Stream stream = current_stream());

}  // namespace attnzoo
