// Bindings for the engine (filled in by its work).
#include "bindings.h"

namespace attnzoo::py {

void bind_engine(nb::module_& m) {}

}  // namespace attnzoo::py
