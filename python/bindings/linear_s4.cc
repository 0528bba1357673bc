// Bindings for S4D / DSS (kernels/linear/s4). The Python wrappers in attnzoo/linear/_s4.py turn complex
// parameters into (real, imaginary) float32 pairs and allocate the outputs.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <tuple>

#include "bindings.h"
#include "core/error.h"
#include "kernels/linear/s4/s4.h"

namespace attnzoo::py {
namespace {

using OptIn = std::optional<AnyArray>;

S4Params s4_params(const AnyArray& dt, const AnyArray& A, const AnyArray& B, const AnyArray& C, const OptIn& D,
                   const std::string& discretization, int64_t dss_length) {
  S4Params p;
  p.dt = as_view(dt, "dt"), p.A = as_view(A, "A"), p.B = as_view(B, "B"), p.C = as_view(C, "C");
  p.D = optional_view(D, "D");
  p.discretization = s4_discretization(discretization.c_str());
  p.dss_length = dss_length;
  return p;
}

}  // namespace

void bind_linear_s4(nb::module_& m) {
  // form: "conv" (Vandermonde + FFT), "recurrent" or "reference" (double precision).
  m.def("s4d",
        [](const std::string& form, const AnyArray& u, const AnyArray& dt, const AnyArray& A, const AnyArray& B,
           const AnyArray& C, const OptIn& D, const std::string& discretization, int64_t dss_length,
           const OptIn& initial_state, const OutArray& out, const std::optional<OutArray>& final_state,
           const OptIn& cu_seqlens) {
          require(form == "conv" || form == "recurrent" || form == "reference", "form",
                  "expected 'conv', 'recurrent' or 'reference', got '" + form + "'");
          S4Args a;
          a.params = s4_params(dt, A, B, C, D, discretization, dss_length);
          a.u = as_view(u, "u");
          a.initial_state = optional_view(initial_state, "initial_state");
          a.out = as_view(out, "out"), a.final_state = optional_view(final_state, "final_state");
          std::tie(a.cu_seqlens, a.cu_seqlens_len) = seqlens_of(cu_seqlens);
          KernelScope scope;
          if (form == "conv") s4_conv(a);
          else if (form == "recurrent") s4_recurrent(a);
          else s4_reference(a);
        },
        nb::arg("form"), nb::arg("u"), nb::arg("dt"), nb::arg("A"), nb::arg("B"), nb::arg("C"), nb::arg("D").none(),
        nb::arg("discretization"), nb::arg("dss_length"), nb::arg("initial_state").none(), nb::arg("out"),
        nb::arg("final_state").none(), nb::arg("cu_seqlens").none());

  m.def("s4d_step",
        [](bool reference, const OutArray& state, const AnyArray& u, const AnyArray& dt, const AnyArray& A,
           const AnyArray& B, const AnyArray& C, const OptIn& D, const std::string& discretization,
           int64_t dss_length, const OutArray& y) {
          S4StepArgs a;
          a.params = s4_params(dt, A, B, C, D, discretization, dss_length);
          a.state = as_view(state, "state"), a.u = as_view(u, "u"), a.y = as_view(y, "y");
          KernelScope scope;
          if (reference) s4_step_reference(a);
          else s4_step(a);
        },
        nb::arg("reference"), nb::arg("state"), nb::arg("u"), nb::arg("dt"), nb::arg("A"), nb::arg("B"),
        nb::arg("C"), nb::arg("D").none(), nb::arg("discretization"), nb::arg("dss_length"), nb::arg("y"));

  m.def("s4d_kernel",
        [](bool reference, const AnyArray& dt, const AnyArray& A, const AnyArray& B, const AnyArray& C,
           const std::string& discretization, int64_t dss_length, const OutArray& K) {
          const S4Params p = s4_params(dt, A, B, C, std::nullopt, discretization, dss_length);
          const TensorView k = as_view(K, "K");
          KernelScope scope;
          if (reference) s4_kernel_reference(p, k);
          else s4_kernel(p, k);
        },
        nb::arg("reference"), nb::arg("dt"), nb::arg("A"), nb::arg("B"), nb::arg("C"), nb::arg("discretization"),
        nb::arg("dss_length"), nb::arg("K"));
}

}  // namespace attnzoo::py
