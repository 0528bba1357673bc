#pragma once
// The float dtypes as the CUDA kernels chosen at run time name them: the linear families', the GEMM's and MLA
// decode's (float_elem.cuh loads and stores them). Plain C++, so the kernels' parameters (delta_recurrent_launch.h,
// mla_decode_params.h, ...) are filled without CUDA headers.
#include <cstdint>

#include "core/dtype.h"

namespace attnzoo::cuda_linear {

enum class Elem : uint8_t { f32, bf16, f16 };

// Only for the float dtypes the problem builders admit (f32, bf16, f16).
inline Elem elem_of(DType t) { return t == DType::bf16 ? Elem::bf16 : t == DType::f16 ? Elem::f16 : Elem::f32; }

}  // namespace attnzoo::cuda_linear
