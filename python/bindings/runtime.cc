// Process-wide runtime switches: how linear-attention / SSM mixers run prompt chunks (chunked kernels, or their
// recurrent kernels token by token, for `attnzoo bench model --linear-prefill=recurrent`), and the precision
// of prefill projections (torch.set_float32_matmul_precision's names).
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "layers/linear_prefill_mode.h"
#include "layers/matmul_precision.h"

namespace attnzoo::py {

void bind_runtime(nb::module_& m) {
  m.def("set_linear_prefill",
        [](const std::string& mode) { set_linear_prefill_mode(parse_linear_prefill_mode(mode)); }, nb::arg("mode"),
        "'chunked' (default) or 'recurrent': how linear/SSM mixers run prompt chunks, for the whole process.");
  m.def("linear_prefill", [] { return std::string(linear_prefill_mode_name(linear_prefill_mode())); },
        "The current linear prefill mode: 'chunked' or 'recurrent'.");
  m.def("set_float32_matmul_precision",
        [](const std::string& p) { set_matmul_precision(parse_matmul_precision(p)); }, nb::arg("precision"),
        "'highest' (default: f32 products), 'high' (the same on CPU) or 'medium' (prefill projections round "
        "activations and weights to bf16 and accumulate in f32 on AVX-512-BF16 CPUs), for the whole process.");
  m.def("get_float32_matmul_precision", [] { return std::string(matmul_precision_name(matmul_precision())); },
        "The current matmul precision: 'highest', 'high' or 'medium'.");
}

}  // namespace attnzoo::py
