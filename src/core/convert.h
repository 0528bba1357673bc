#pragma once
// Bulk dtype conversion to and from f32, vectorised per target (bf16 is a shift; f16 goes through F16C when
// the target has it).
#include <cstddef>

#include "core/dtype.h"

namespace attnzoo {

// DTypeError naming the dtype for an integer src_dtype (int8 / e4m3 are the KV cache's codes and do widen).
void convert_to_f32(const void* src, DType src_dtype, float* dst, size_t n);
void convert_from_f32(const float* src, void* dst, DType dst_dtype, size_t n);

}  // namespace attnzoo
