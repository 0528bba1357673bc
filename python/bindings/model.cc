// Bindings for the model (filled in by its work).
#include "bindings.h"

namespace attnzoo::py {

void bind_model(nb::module_& m) {}

}  // namespace attnzoo::py
