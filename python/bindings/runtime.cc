// Process-wide runtime switches: how linear-attention / SSM mixers run prompt chunks (chunked kernels, or their
// recurrent kernels token by token, for `attnzoo bench model --linear-prefill=recurrent`).
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "layers/linear_prefill_mode.h"

namespace attnzoo::py {

void bind_runtime(nb::module_& m) {
  m.def("set_linear_prefill",
        [](const std::string& mode) { set_linear_prefill_mode(parse_linear_prefill_mode(mode)); }, nb::arg("mode"),
        "'chunked' (default) or 'recurrent': how linear/SSM mixers run prompt chunks, for the whole process.");
  m.def("linear_prefill", [] { return std::string(linear_prefill_mode_name(linear_prefill_mode())); },
        "The current linear prefill mode: 'chunked' or 'recurrent'.");
}

}  // namespace attnzoo::py
