// Bindings for the explain (filled in by its work).
#include "bindings.h"

namespace attnzoo::py {

void bind_explain(nb::module_& m) {}

}  // namespace attnzoo::py
