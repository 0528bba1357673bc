#pragma once
// copy_head_rows (layers/head_rows.h) on an NVIDIA GPU: the gathers, pads, broadcasts and slices around MLA's
// expanded prefill (models/cuda/device_mla.h). No CUDA headers here.
#include "core/device.h"
#include "layers/head_rows.h"

namespace attnzoo {

// check_head_row_copy, both tensors on one CUDA device. ArgumentError / DTypeError naming the argument.
void check_head_rows_cuda(const HeadRowCopy& c);
// The launcher (head_rows.cu, CUDA builds only) checks first, then runs on the tensors' device; the indices are
// device memory. The rows written must not overlap the rows read.
void copy_head_rows_cuda(const HeadRowCopy& c, Stream stream = current_stream());

}  // namespace attnzoo
