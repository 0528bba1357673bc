// Bindings for the benchmark harness.
#include "bindings.h"

namespace attnzoo::py {

void bind_bench(nb::module_& m) {}

}  // namespace attnzoo::py
