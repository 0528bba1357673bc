// Bindings for the linear family, delta part.
#include "bindings.h"

namespace attnzoo::py {

void bind_linear_delta(nb::module_& m) {}

}  // namespace attnzoo::py
