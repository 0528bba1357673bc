// Bindings for the linear family, delta part: the delta rule, the gated delta rule and KDA, each in chunked,
// recurrent and reference form. The Python wrappers (attnzoo/linear/_delta.py) allocate o and the final state in
// the caller's framework (or pass initial_state again as final_state for an in-place update) and make inputs
// contiguous; shapes, dtypes, gates and (unless check_values is false) NaN / Inf are validated in C++, errors
// naming the argument. Tensors may live in CUDA memory: the entries themselves run them there (the recurrent
// and chunked forms) or refuse them by name (the references).
#include <nanobind/stl/optional.h>

#include <optional>
#include <tuple>

#include "bindings.h"
#include "core/error.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"

namespace attnzoo::py {
namespace {

using DeltaEntry = void (*)(const DeltaArgs&);

void bind_entry(nb::module_& m, const char* name, DeltaEntry entry) {
  m.def(
      name,
      [entry](const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, std::optional<DeviceArray> g,
              std::optional<DeviceArray> beta, const DeviceOutArray& o, std::optional<DeviceArray> initial_state,
              std::optional<DeviceOutArray> final_state, std::optional<float> scale,
              std::optional<AnyArray> cu_seqlens, bool use_qk_l2norm_in_kernel, int64_t chunk_size,
              bool check_values, uintptr_t stream) {
        DeltaArgs a;
        a.q = as_view(q, "q");
        a.k = as_view(k, "k");
        a.v = as_view(v, "v");
        if (g) a.g = as_view(*g, "g");
        if (beta) a.beta = as_view(*beta, "beta");
        a.o = as_view(o, "o");
        if (initial_state) a.initial_state = as_view(*initial_state, "initial_state");
        if (final_state) a.final_state = as_view(*final_state, "final_state");
        std::tie(a.cu_seqlens, a.cu_seqlens_len) = seqlens_of(cu_seqlens);
        a.scale = scale;
        a.use_qk_l2norm_in_kernel = use_qk_l2norm_in_kernel;
        a.chunk_size = chunk_size;
        a.check_values = check_values;
        KernelScope scope;
        const StreamGuard on_stream(stream_of(stream));
        entry(a);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(), nb::arg("beta").none(), nb::arg("o"),
      nb::arg("initial_state").none(), nb::arg("final_state").none(), nb::arg("scale").none(),
      nb::arg("cu_seqlens").none(), nb::arg("use_qk_l2norm_in_kernel"), nb::arg("chunk_size"),
      nb::arg("check_values") = true, nb::arg("stream") = 0);
}

}  // namespace

void bind_linear_delta(nb::module_& m) {
  bind_entry(m, "chunk_delta_rule", chunk_delta_rule);
  bind_entry(m, "recurrent_delta_rule", recurrent_delta_rule);
  bind_entry(m, "delta_rule_reference", delta_rule_reference);
  bind_entry(m, "chunk_gated_delta_rule", chunk_gated_delta_rule);
  bind_entry(m, "recurrent_gated_delta_rule", recurrent_gated_delta_rule);
  bind_entry(m, "gated_delta_rule_reference", gated_delta_rule_reference);
  bind_entry(m, "chunk_kda", chunk_kda);
  bind_entry(m, "recurrent_kda", recurrent_kda);
  bind_entry(m, "kda_reference", kda_reference);
}

}  // namespace attnzoo::py
