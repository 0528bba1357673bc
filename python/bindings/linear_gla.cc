// Bindings for the linear family, gla part.
#include "bindings.h"

namespace attnzoo::py {

void bind_linear_gla(nb::module_& m) {}

}  // namespace attnzoo::py
