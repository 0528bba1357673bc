#include "core/float_dtype.h"

#include <string>

#include "core/error.h"

namespace attnzoo {

void require_float_dtype(const TensorView& t, const char* name) {
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw DTypeError(std::string(name) + ": expected float32, bfloat16 or float16, got " + dtype_name(t.dtype));
}

}  // namespace attnzoo
