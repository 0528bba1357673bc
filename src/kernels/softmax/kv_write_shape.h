#pragma once
// The checks of a paged-rows scatter that do not depend on where the tensors live, shared by the CPU scatter
// (kv_write.cc) and the CUDA one's host side (cuda/kv_write_checks.cc), so both refuse alike.
#include "core/tensor.h"
#include "kernels/softmax/kv_quant.h"

namespace attnzoo {

// rows: a float dtype, [T, heads, dim] or [T, dim], last dim contiguous; cache: a KV-cache dtype, [num_blocks,
// block_size] + rows' trailing dims, last dim contiguous; scale as check_kv_scale takes it. Returns its strides.
KvScaleView check_paged_rows_shape(const TensorView& rows, const TensorView& cache, const char* rows_name,
                                   const char* cache_name, const TensorView& scale, const char* scale_name);

}  // namespace attnzoo
