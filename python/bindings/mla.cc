// Bindings for MLA (DeepSeek-V2/V3): the naive form (prefill) and the absorbed form against a latent cache
// (decode). attnzoo/mla.py allocates `out` in the caller's framework and documents the arguments.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "core/error.h"
#include "core/finite_check.h"
#include "kernels/softmax/mla.h"
#include "kernels/softmax/mla_problem.h"

namespace attnzoo::py {
namespace {

MlaWeights make_weights(const TensorView& w_kv_b, const TensorView& q, int64_t kv_lora_rank, int64_t qk_nope_head_dim,
                        int64_t qk_rope_head_dim, int64_t v_head_dim) {
  require(q.ndim >= 3, "q", "must be [..., heads, qk_nope_head_dim + qk_rope_head_dim], got " + q.shape_str());
  return {w_kv_b, q.size(-2), qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank};
}

MlaOptions make_options(std::optional<float> scale, bool causal) {
  MlaOptions o;
  if (scale) o.scale = *scale;
  o.causal = causal;
  return o;
}

}  // namespace

void bind_mla(nb::module_& m) {
  m.def("mla_prefill",
        [](const AnyArray& q, const AnyArray& kv_latent, const AnyArray& w_kv_b, const OutArray& out,
           int64_t kv_lora_rank, int64_t qk_nope_head_dim, int64_t qk_rope_head_dim, int64_t v_head_dim,
           std::optional<float> scale, bool causal, std::optional<AnyArray> cu_seqlens,
           std::optional<AnyArray> cu_seqlens_k, std::optional<AnyArray> cache_seqlens,
           std::optional<AnyArray> block_table, bool reference, bool check_inputs, std::optional<AnyArray> k_scale,
           const std::string& kv_cache_dtype) {
          const TensorView qv = as_view(q, "q"), ov = as_view(out, "out");
          const MlaWeights w = make_weights(as_view(w_kv_b, "w_kv_b"), qv, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim);
          const VarlenInfo vl = make_varlen(cu_seqlens, cu_seqlens_k);
          const MlaOptions o = make_options(scale, causal);
          if (cache_seqlens) {  // kv_latent is a latent cache (paged with block_table, else contiguous)
            const int64_t B = cu_seqlens ? vl.num_seqs : qv.shape[0];
            LatentCacheView cache{as_kv_cache(as_view(kv_latent, "latent_cache"), kv_cache_dtype, "latent_cache"),
                                  as_int32(*cache_seqlens, "cache_seqlens", B)};
            cache.scale = optional_view(k_scale, "k_scale");
            if (block_table) cache.block_table = as_block_table(*block_table, B, &cache.max_blocks_per_seq);
            KernelScope scope;
            if (check_inputs) {  // only q: a cache's unused rows may hold anything
              (void)make_mla_cache_problem(qv, cache, w, ov, o, vl);  // shapes first: the scan trusts them
              require_finite(qv, "q");
            }
            if (reference)
              mla_prefill_reference(qv, cache, w, ov, o, vl);
            else
              mla_prefill(qv, cache, w, ov, o, vl);
            return;
          }
          require(!block_table, "cache_seqlens", "is required with block_table (each sequence's row count)");
          refuse_quant_without_cache(k_scale.has_value(), false, kv_cache_dtype, "cache_seqlens");
          const TensorView lv = as_view(kv_latent, "kv_latent");
          KernelScope scope;
          if (check_inputs) {
            (void)make_mla_prefill_problem(qv, lv, w, ov, o, vl);  // shapes first: the scan trusts them
            require_finite(qv, "q");
            require_finite(lv, "kv_latent");
          }
          if (reference)
            mla_prefill_reference(qv, lv, w, ov, o, vl);
          else
            mla_prefill(qv, lv, w, ov, o, vl);
        },
        nb::arg("q"), nb::arg("kv_latent"), nb::arg("w_kv_b"), nb::arg("out"), nb::arg("kv_lora_rank"),
        nb::arg("qk_nope_head_dim"), nb::arg("qk_rope_head_dim"), nb::arg("v_head_dim"), nb::arg("scale").none(),
        nb::arg("causal"), nb::arg("cu_seqlens").none(), nb::arg("cu_seqlens_k").none(),
        nb::arg("cache_seqlens").none(), nb::arg("block_table").none(), nb::arg("reference") = false,
        nb::arg("check_inputs") = false, nb::arg("k_scale").none() = nb::none(), nb::arg("kv_cache_dtype") = "auto");

  m.def("mla_decode",
        // The tensors may live on a GPU (mla_decode's CUDA branch; launched on `stream`); cache_seqlens and
        // block_table are host metadata, as everywhere.
        [](const DeviceArray& q, const DeviceArray& latent_cache, const AnyArray& cache_seqlens,
           const DeviceArray& w_kv_b, const DeviceOutArray& out, int64_t kv_lora_rank, int64_t qk_nope_head_dim,
           int64_t qk_rope_head_dim, int64_t v_head_dim, std::optional<AnyArray> block_table,
           std::optional<float> scale, bool causal, bool reference, bool check_inputs,
           std::optional<DeviceArray> k_scale, const std::string& kv_cache_dtype, uintptr_t stream) {
          const TensorView qv = as_view(q, "q"), ov = as_view(out, "out");
          const MlaWeights w = make_weights(as_view(w_kv_b, "w_kv_b"), qv, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim);
          const int64_t B = qv.shape[0];
          LatentCacheView cache;
          cache.latent = as_kv_cache(as_view(latent_cache, "latent_cache"), kv_cache_dtype, "latent_cache");
          cache.scale = optional_view(k_scale, "k_scale");
          cache.cache_seqlens = as_int32(cache_seqlens, "cache_seqlens", B);
          if (block_table) cache.block_table = as_block_table(*block_table, B, &cache.max_blocks_per_seq);
          const MlaOptions o = make_options(scale, causal);
          refuse_host_only_options(qv.device, reference, check_inputs);
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (check_inputs) require_finite(qv, "q");  // only q: a cache's unused rows may hold anything
          if (reference)
            mla_decode_reference(qv, cache, w, ov, o);
          else
            mla_decode(qv, cache, w, ov, o);
        },
        nb::arg("q"), nb::arg("latent_cache"), nb::arg("cache_seqlens"), nb::arg("w_kv_b"), nb::arg("out"),
        nb::arg("kv_lora_rank"), nb::arg("qk_nope_head_dim"), nb::arg("qk_rope_head_dim"), nb::arg("v_head_dim"),
        nb::arg("block_table").none(), nb::arg("scale").none(), nb::arg("causal"), nb::arg("reference") = false,
        nb::arg("check_inputs") = false, nb::arg("k_scale").none() = nb::none(), nb::arg("kv_cache_dtype") = "auto",
        nb::arg("stream") = 0);
}

}  // namespace attnzoo::py
