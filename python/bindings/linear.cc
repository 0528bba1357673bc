// Bindings for the linear-attention and state-space family (filled in by the linear work).
#include "bindings.h"

namespace attnzoo::py {

void bind_linear(nb::module_& m) {}

}  // namespace attnzoo::py
