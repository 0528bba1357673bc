// Bindings for the linear family, state-space part (Mamba-2, Mamba, RWKV-7, RWKV-4). The Python wrappers in
// attnzoo/linear/_ssm.py allocate the outputs in the caller's framework and pass them here. Mamba's, Mamba-2's and
// RWKV-7's tensors may live in CUDA memory: their recurrent forms and decode steps run them there (on the caller's
// `stream`), the chunked forms and the references refuse them by name.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <optional>
#include <string>
#include <tuple>

#include "bindings.h"
#include "core/error.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/rwkv4/rwkv4.h"
#include "kernels/linear/rwkv7/rwkv7.h"

namespace attnzoo::py {
namespace {

using OptIn = std::optional<AnyArray>;
using OptOut = std::optional<OutArray>;
using OptDeviceIn = std::optional<DeviceArray>;
using OptDeviceOut = std::optional<DeviceOutArray>;
using Limit = std::optional<std::tuple<float, float>>;

TensorView view_or_empty(const OptIn& a, const char* name) { return a ? as_view(*a, name) : TensorView{}; }
TensorView view_or_empty(const OptOut& a, const char* name) { return a ? as_view(*a, name) : TensorView{}; }
TensorView view_or_empty(const OptDeviceIn& a, const char* name) { return a ? as_view(*a, name) : TensorView{}; }
TensorView view_or_empty(const OptDeviceOut& a, const char* name) { return a ? as_view(*a, name) : TensorView{}; }

void bind_mamba2(nb::module_& m) {
  m.def("mamba2_scan",
        [](const std::string& mode, const DeviceArray& x, const DeviceArray& dt, const DeviceArray& A,
           const DeviceArray& B, const DeviceArray& C, const OptDeviceIn& D, const OptDeviceIn& z,
           const OptDeviceIn& dt_bias, bool dt_softplus, Limit dt_limit, const OptDeviceIn& initial_state,
           const DeviceOutArray& y, const OptDeviceOut& final_state, const OptIn& cu_seqlens, int64_t chunk_size,
           uintptr_t stream) {
          Mamba2Args a;
          a.x = as_view(x, "x"), a.dt = as_view(dt, "dt"), a.A = as_view(A, "A"), a.B = as_view(B, "B");
          a.C = as_view(C, "C"), a.D = view_or_empty(D, "D"), a.z = view_or_empty(z, "z");
          a.dt_bias = view_or_empty(dt_bias, "dt_bias");
          a.dt_softplus = dt_softplus;
          if (dt_limit) a.dt_limit = true, a.dt_min = std::get<0>(*dt_limit), a.dt_max = std::get<1>(*dt_limit);
          a.initial_state = view_or_empty(initial_state, "initial_state");
          a.y = as_view(y, "y"), a.final_state = view_or_empty(final_state, "final_state");
          std::tie(a.cu_seqlens, a.cu_seqlens_len) = seqlens_of(cu_seqlens);
          a.chunk_size = chunk_size;
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (mode == "chunk") mamba2_chunk_scan(a);
          else if (mode == "recurrent") mamba2_recurrent(a);
          else if (mode == "reference") mamba2_reference(a);
          else throw ArgumentError("mode: unknown '" + mode + "'");
        },
        nb::arg("mode"), nb::arg("x"), nb::arg("dt"), nb::arg("A"), nb::arg("B"), nb::arg("C"), nb::arg("D").none(),
        nb::arg("z").none(), nb::arg("dt_bias").none(), nb::arg("dt_softplus"), nb::arg("dt_limit").none(),
        nb::arg("initial_state").none(), nb::arg("y"), nb::arg("final_state").none(), nb::arg("cu_seqlens").none(),
        nb::arg("chunk_size"), nb::arg("stream") = 0);

  m.def("mamba2_state_update",
        [](bool reference, const DeviceOutArray& state, const DeviceArray& x, const DeviceArray& dt,
           const DeviceArray& A, const DeviceArray& B, const DeviceArray& C, const OptDeviceIn& D,
           const OptDeviceIn& z, const OptDeviceIn& dt_bias, bool dt_softplus, Limit dt_limit,
           const DeviceOutArray& y, uintptr_t stream) {
          Mamba2StepArgs a;
          a.state = as_view(state, "state");
          a.x = as_view(x, "x"), a.dt = as_view(dt, "dt"), a.A = as_view(A, "A"), a.B = as_view(B, "B");
          a.C = as_view(C, "C"), a.D = view_or_empty(D, "D"), a.z = view_or_empty(z, "z");
          a.dt_bias = view_or_empty(dt_bias, "dt_bias");
          a.dt_softplus = dt_softplus;
          if (dt_limit) a.dt_limit = true, a.dt_min = std::get<0>(*dt_limit), a.dt_max = std::get<1>(*dt_limit);
          a.y = as_view(y, "y");
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (reference) mamba2_state_update_reference(a);
          else mamba2_state_update(a);
        },
        nb::arg("reference"), nb::arg("state"), nb::arg("x"), nb::arg("dt"), nb::arg("A"), nb::arg("B"),
        nb::arg("C"), nb::arg("D").none(), nb::arg("z").none(), nb::arg("dt_bias").none(), nb::arg("dt_softplus"),
        nb::arg("dt_limit").none(), nb::arg("y"), nb::arg("stream") = 0);
}

void bind_mamba(nb::module_& m) {
  m.def("selective_scan",
        [](bool reference, const DeviceArray& u, const DeviceArray& delta, const DeviceArray& A,
           const DeviceArray& B, const DeviceArray& C, const OptDeviceIn& D, const OptDeviceIn& z,
           const OptDeviceIn& delta_bias, bool delta_softplus, const OptDeviceIn& initial_state,
           const DeviceOutArray& out, const OptDeviceOut& final_state, const OptIn& cu_seqlens, uintptr_t stream) {
          SelectiveScanArgs a;
          a.u = as_view(u, "u"), a.delta = as_view(delta, "delta"), a.A = as_view(A, "A"), a.B = as_view(B, "B");
          a.C = as_view(C, "C"), a.D = view_or_empty(D, "D"), a.z = view_or_empty(z, "z");
          a.delta_bias = view_or_empty(delta_bias, "delta_bias");
          a.delta_softplus = delta_softplus;
          a.initial_state = view_or_empty(initial_state, "initial_state");
          a.out = as_view(out, "out"), a.final_state = view_or_empty(final_state, "final_state");
          std::tie(a.cu_seqlens, a.cu_seqlens_len) = seqlens_of(cu_seqlens);
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (reference) selective_scan_reference(a);
          else selective_scan(a);
        },
        nb::arg("reference"), nb::arg("u"), nb::arg("delta"), nb::arg("A"), nb::arg("B"), nb::arg("C"),
        nb::arg("D").none(), nb::arg("z").none(), nb::arg("delta_bias").none(), nb::arg("delta_softplus"),
        nb::arg("initial_state").none(), nb::arg("out"), nb::arg("final_state").none(),
        nb::arg("cu_seqlens").none(), nb::arg("stream") = 0);

  m.def("selective_state_update",
        [](bool reference, const DeviceOutArray& state, const DeviceArray& x, const DeviceArray& dt,
           const DeviceArray& A, const DeviceArray& B, const DeviceArray& C, const OptDeviceIn& D,
           const OptDeviceIn& z, const OptDeviceIn& dt_bias, bool dt_softplus, const DeviceOutArray& y,
           uintptr_t stream) {
          SelectiveStateUpdateArgs a;
          a.state = as_view(state, "state");
          a.x = as_view(x, "x"), a.dt = as_view(dt, "dt"), a.A = as_view(A, "A"), a.B = as_view(B, "B");
          a.C = as_view(C, "C"), a.D = view_or_empty(D, "D"), a.z = view_or_empty(z, "z");
          a.dt_bias = view_or_empty(dt_bias, "dt_bias");
          a.dt_softplus = dt_softplus;
          a.y = as_view(y, "y");
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (reference) selective_state_update_reference(a);
          else selective_state_update(a);
        },
        nb::arg("reference"), nb::arg("state"), nb::arg("x"), nb::arg("dt"), nb::arg("A"), nb::arg("B"),
        nb::arg("C"), nb::arg("D").none(), nb::arg("z").none(), nb::arg("dt_bias").none(), nb::arg("dt_softplus"),
        nb::arg("y"), nb::arg("stream") = 0);
}

void bind_rwkv4(nb::module_& m) {
  m.def("rwkv4",
        [](bool reference, const AnyArray& w, const AnyArray& u, const AnyArray& k, const AnyArray& v,
           const OptIn& initial_state, const OutArray& out, const OptOut& final_state, const OptIn& cu_seqlens) {
          Rwkv4Args a;
          a.w = as_view(w, "w"), a.u = as_view(u, "u"), a.k = as_view(k, "k"), a.v = as_view(v, "v");
          a.initial_state = view_or_empty(initial_state, "state");
          a.out = as_view(out, "out"), a.final_state = view_or_empty(final_state, "final_state");
          std::tie(a.cu_seqlens, a.cu_seqlens_len) = seqlens_of(cu_seqlens);
          KernelScope scope;
          if (reference) rwkv4_reference(a);
          else recurrent_rwkv4(a);
        },
        nb::arg("reference"), nb::arg("w"), nb::arg("u"), nb::arg("k"), nb::arg("v"), nb::arg("initial_state").none(),
        nb::arg("out"), nb::arg("final_state").none(), nb::arg("cu_seqlens").none());
}

void bind_rwkv7(nb::module_& m) {
  // form: "reference" (double precision), "recurrent" or "chunk" (chunk_size used only there).
  m.def("rwkv7",
        [](const std::string& form, const DeviceArray& r, const DeviceArray& w, const DeviceArray& k,
           const DeviceArray& v, const DeviceArray& a, const DeviceArray& b, float scale,
           const OptDeviceIn& initial_state, const DeviceOutArray& o, const OptDeviceOut& final_state,
           const OptIn& cu_seqlens, int64_t chunk_size, uintptr_t stream) {
          require(form == "reference" || form == "recurrent" || form == "chunk", "form",
                  "expected 'reference', 'recurrent' or 'chunk', got '" + form + "'");
          Rwkv7Args x;
          x.r = as_view(r, "r"), x.w = as_view(w, "w"), x.k = as_view(k, "k"), x.v = as_view(v, "v");
          x.a = as_view(a, "a"), x.b = as_view(b, "b"), x.scale = scale;
          x.initial_state = view_or_empty(initial_state, "initial_state");
          x.o = as_view(o, "o"), x.final_state = view_or_empty(final_state, "final_state");
          std::tie(x.cu_seqlens, x.cu_seqlens_len) = seqlens_of(cu_seqlens);
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (form == "reference") rwkv7_reference(x);
          else if (form == "recurrent") recurrent_rwkv7(x);
          else chunk_rwkv7(x, chunk_size);
        },
        nb::arg("form"), nb::arg("r"), nb::arg("w"), nb::arg("k"), nb::arg("v"), nb::arg("a"), nb::arg("b"),
        nb::arg("scale"), nb::arg("initial_state").none(), nb::arg("o"), nb::arg("final_state").none(),
        nb::arg("cu_seqlens").none(), nb::arg("chunk_size") = 64, nb::arg("stream") = 0);
}

}  // namespace

void bind_linear_ssm(nb::module_& m) {
  bind_rwkv7(m);
  bind_rwkv4(m);
  bind_mamba2(m);
  bind_mamba(m);
}

}  // namespace attnzoo::py
