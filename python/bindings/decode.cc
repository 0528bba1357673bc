// Bindings for decode attention against contiguous and paged KV caches. The Python wrapper (attnzoo/decode.py)
// allocates `out` in the caller's framework and converts the integer and vector arguments; this layer only
// views the arrays and checks what it reads through raw pointers (the int32 tables).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>

#include "bindings.h"
#include "core/error.h"
#include "core/finite_check.h"
#include "kernels/softmax/decode_problem.h"

namespace attnzoo::py {
void bind_decode(nb::module_& m) {
  m.def("attention_decode",
        [](const DeviceArray& q, const DeviceArray& k_cache, const DeviceArray& v_cache, const AnyArray& cache_seqlens,
           std::optional<AnyArray> block_table, const DeviceOutArray& out, bool causal, std::optional<float> scale,
           std::optional<int64_t> window, std::optional<float> softcap, std::optional<AnyArray> sinks,
           std::optional<AnyArray> alibi_slopes, const BlockMask* block_mask, bool reference, bool check_inputs,
           std::optional<DeviceArray> k_scale, std::optional<DeviceArray> v_scale, const std::string& kv_cache_dtype,
           uintptr_t stream) {
          const TensorView qv = as_view(q, "q"), ov = as_view(out, "out");
          require(qv.ndim == 4, "q", "must be [batch, new_tokens, heads, head_dim], got " + qv.shape_str());
          KvCacheView cache;
          cache.k = as_kv_cache(as_view(k_cache, "k_cache"), kv_cache_dtype, "k_cache");
          cache.v = as_kv_cache(as_view(v_cache, "v_cache"), kv_cache_dtype, "v_cache");
          cache.k_scale = optional_view(k_scale, "k_scale");
          cache.v_scale = optional_view(v_scale, "v_scale");
          cache.cache_seqlens = as_int32(cache_seqlens, "cache_seqlens", qv.shape[0]);
          if (block_table) cache.block_table = as_block_table(*block_table, qv.shape[0], &cache.max_blocks_per_seq);
          const AttentionOptions o =
              make_attention_options(qv.shape[2], causal, scale, window, softcap, sinks, alibi_slopes, block_mask);
          const DecodeProblem p = make_decode_problem(qv, cache, ov, o);
          refuse_host_only_options(p.device, reference, check_inputs);
          KernelScope scope;
          if (check_inputs) require_finite(qv, "q");
          const StreamGuard on_stream(stream_of(stream));
          if (reference)
            attention_decode_reference(p);
          else
            attention_decode(p);
        },
        nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("cache_seqlens"),
        nb::arg("block_table").none(), nb::arg("out"), nb::arg("causal"), nb::arg("scale").none(),
        nb::arg("window").none(), nb::arg("softcap").none(), nb::arg("sinks").none(),
        nb::arg("alibi_slopes").none(), nb::arg("block_mask").none(), nb::arg("reference") = false,
        nb::arg("check_inputs") = false, nb::arg("k_scale").none() = nb::none(),
        nb::arg("v_scale").none() = nb::none(), nb::arg("kv_cache_dtype") = "auto", nb::arg("stream") = 0);
}

}  // namespace attnzoo::py
