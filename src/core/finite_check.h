#pragma once
// The NaN / Inf scan of kernel inputs. Bindings run it only after the problem's shapes and strides have been
// validated, so a malformed view (a stride-0 broadcast of absurd shape) is refused before anything reads it.
#include "core/tensor.h"

namespace attnzoo {

// Throws ArgumentError naming `name` and the flat index of the first NaN / Inf. Any strides; integer views
// pass unscanned.
void require_finite(const TensorView& t, const char* name);

}  // namespace attnzoo
