// Bindings for CacheSpec, what one layer remembers per sequence: the same constructors and byte counts the
// memory pool sizes itself with, so Python's memory figures (attnzoo.explain.memory) never keep formulas of their own.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "layers/sequence_schedule.h"
#include "models/model.h"
#include "state/cache_spec.h"

namespace attnzoo::py {

void bind_cache_spec(nb::module_& m) {
  nb::class_<CacheSpec>(m, "CacheSpec", "What one layer remembers per sequence (paged per-token part + fixed state)")
      .def_prop_ro("kind", [](const CacheSpec& s) { return std::string(cache_kind_name(s.kind)); })
      .def_prop_ro("dtype", [](const CacheSpec& s) { return std::string(dtype_name(s.dtype)); })
      .def_ro("paged_tensors", &CacheSpec::paged_tensors)
      .def_ro("heads", &CacheSpec::heads)
      .def_ro("head_dim", &CacheSpec::head_dim)
      .def_ro("window", &CacheSpec::window)
      .def_ro("state_floats", &CacheSpec::state_floats)
      .def_prop_ro("bytes_per_token", &CacheSpec::bytes_per_token)
      .def_prop_ro("fixed_bytes", &CacheSpec::fixed_bytes)
      .def("bytes_for", &CacheSpec::bytes_for, nb::arg("tokens"), nb::arg("block_tokens") = 1,
           "Bytes a sequence of `tokens` tokens holds, the paged part rounded up to whole blocks")
      .def("describe", &CacheSpec::describe)
      .def("__repr__", [](const CacheSpec& s) { return "CacheSpec(" + s.describe() + ")"; });

  // The paged part's element type, named as Model.load's kv_cache_dtype ("float32", "bfloat16", "float16").
  auto with_dtype = [](CacheSpec s, const std::string& dtype) {
    require(dtype != "auto", "dtype", "must name a type ('float32', 'bfloat16' or 'float16'), not 'auto'");
    s.dtype = parse_kv_cache_dtype(dtype);
    return s;
  };
  m.def(
      "cache_spec_kv",
      [with_dtype](int64_t kv_heads, int64_t head_dim, const std::string& dtype, int64_t window) {
        return with_dtype(CacheSpec::kv(kv_heads, head_dim, window), dtype);
      },
      nb::arg("kv_heads"), nb::arg("head_dim"), nb::arg("dtype") = "float32", nb::arg("window") = 0,
      "Softmax attention's K and V per token (window > 0: a sliding-window layer)");
  m.def(
      "cache_spec_latent",
      [with_dtype](int64_t latent_dim, const std::string& dtype) {
        return with_dtype(CacheSpec::latent(latent_dim), dtype);
      },
      nb::arg("latent_dim"), nb::arg("dtype") = "float32",
      "MLA's latent cache: one row of kv_lora_rank + qk_rope_head_dim per token, shared by every head");
  m.def("cache_spec_state", &CacheSpec::state, nb::arg("floats"), "A fixed f32 state per sequence");
  m.def("cache_spec_conv_state", &conv_state_spec, nb::arg("conv_elems"), nb::arg("state_elems"),
        "A recurrent layer's slot: its short-conv tail (padded to a cache line) then its state, f32");
  m.def("cache_spec_combine", &CacheSpec::combine, nb::arg("a"), nb::arg("b"),
        "Both layers' needs in one spec (a parallel attention + SSM layer)");
}

}  // namespace attnzoo::py
