// Bindings for decode attention against contiguous and paged KV caches (filled in by the decode work).
#include "bindings.h"

namespace attnzoo::py {

void bind_decode(nb::module_& m) {}

}  // namespace attnzoo::py
