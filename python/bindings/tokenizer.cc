// Bindings for the tokenizer (filled in by its work).
#include "bindings.h"

namespace attnzoo::py {

void bind_tokenizer(nb::module_& m) {}

}  // namespace attnzoo::py
