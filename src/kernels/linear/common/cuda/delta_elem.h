#pragma once
// The delta family's float dtypes as its CUDA kernels name them (delta_elem.cuh loads and stores them). Plain
// C++, so the kernels' parameters (delta_recurrent_launch.h) are filled without CUDA headers.
#include <cstdint>

#include "core/dtype.h"

namespace attnzoo::cuda_delta {

enum class Elem : uint8_t { f32, bf16, f16 };

// Only for the float dtypes make_delta_problem admits.
inline Elem elem_of(DType t) { return t == DType::bf16 ? Elem::bf16 : t == DType::f16 ? Elem::f16 : Elem::f32; }

}  // namespace attnzoo::cuda_delta
