// Bindings for MLA (DeepSeek-V2/V3): naive and absorbed forms (filled in by the MLA work).
#include "bindings.h"

namespace attnzoo::py {

void bind_mla(nb::module_& m) {}

}  // namespace attnzoo::py
