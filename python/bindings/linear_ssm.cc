// Bindings for the linear family, ssm part.
#include "bindings.h"

namespace attnzoo::py {

void bind_linear_ssm(nb::module_& m) {}

}  // namespace attnzoo::py
