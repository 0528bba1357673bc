// Bindings for the softmax family. The Python wrappers in attnzoo/__init__.py allocate `out` in the caller's
// framework and pass it here, so results come back without a copy.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bindings.h"
#include "core/error.h"
#include "core/finite_check.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/kv_write.h"
#include "kernels/softmax/lsh.h"

namespace attnzoo::py {
// Fills the options shared by every softmax entry point from Python arguments.
AttentionOptions make_attention_options(int64_t Hq, bool causal, std::optional<float> scale, std::optional<int64_t> window,
                              std::optional<float> softcap, const std::optional<AnyArray>& sinks,
                              const std::optional<AnyArray>& alibi_slopes, const BlockMask* block_mask) {
  AttentionOptions o;
  o.causal = causal;
  if (scale) {
    // In C++ a NaN scale means "default"; from Python it is a mistake.
    require(std::isfinite(*scale) && *scale > 0.f, "scale", "must be a finite positive number");
    o.scale = *scale;
  }
  if (window) {
    require(*window >= 1, "window", "must be >= 1 (use None for no window), got " + std::to_string(*window));
    o.window = *window;
  }
  if (softcap) {
    require(*softcap > 0.f, "softcap", "must be > 0 (use None to disable)");
    o.softcap = *softcap;
  }
  if (sinks) o.sinks = as_f32_vector(*sinks, "sinks", Hq);
  if (alibi_slopes) o.alibi_slopes = as_f32_vector(*alibi_slopes, "alibi_slopes", Hq);
  o.block_mask = block_mask;
  return o;
}

VarlenInfo make_varlen(const std::optional<AnyArray>& cu_seqlens, const std::optional<AnyArray>& cu_seqlens_k) {
  VarlenInfo vl;
  if (!cu_seqlens) {
    require(!cu_seqlens_k, "cu_seqlens_k", "given without cu_seqlens");
    return vl;
  }
  const TensorView cv = as_view(*cu_seqlens, "cu_seqlens");
  require(cv.ndim == 1 && cv.shape[0] >= 2, "cu_seqlens", "must be 1-D with at least 2 entries");
  vl.num_seqs = cv.shape[0] - 1;
  vl.cu_seqlens_q = as_int32(*cu_seqlens, "cu_seqlens");
  if (cu_seqlens_k) vl.cu_seqlens_k = as_int32(*cu_seqlens_k, "cu_seqlens_k", vl.num_seqs + 1);
  return vl;
}

void refuse_host_only_options(Device device, bool reference, bool check_inputs) {
  if (device.is_cpu()) return;
  require(!reference, "reference", "the reference kernels read host memory; q lives on " + device.str());
  require(!check_inputs, "check_inputs",
          "the finite-value scan reads host memory; q lives on " + device.str() + " (scan it there first)");
}

void bind_softmax(nb::module_& m) {
  nb::class_<BlockMask>(m, "BlockMask", "Block-sparse visibility pattern (see attnzoo.block_mask).")
      .def("__init__",
           [](BlockMask* self, int64_t seq_len, int64_t block, int64_t local_blocks, int64_t global_tokens,
              int64_t stride, int64_t random_blocks, uint64_t seed) {
             new (self) BlockMask({seq_len, block, local_blocks, global_tokens, stride, random_blocks, seed});
           },
           nb::arg("seq_len"), nb::arg("block"), nb::arg("local_blocks"), nb::arg("global_tokens"),
           nb::arg("stride"), nb::arg("random_blocks"), nb::arg("seed"))
      .def_prop_ro("block", &BlockMask::block)
      .def_prop_ro("num_blocks", &BlockMask::num_blocks)
      .def_prop_ro("seq_len", [](const BlockMask& b) { return b.spec().seq_len; })
      .def("density", &BlockMask::density)
      .def("block_visible", &BlockMask::block_visible)
      .def("blocks", [](const BlockMask& b) {
        const int64_t n = b.num_blocks();
        auto* copy = new std::vector<uint8_t>(b.bits());
        nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>>(copy->data(), {size_t(n), size_t(n)}, owner);
      }, "The [num_blocks, num_blocks] uint8 matrix (row = query block).");

  m.def("attention",
        [](const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const DeviceOutArray& out, bool causal,
           std::optional<float> scale, std::optional<int64_t> window, std::optional<float> softcap,
           std::optional<AnyArray> sinks, std::optional<AnyArray> alibi_slopes,
           std::optional<AnyArray> cu_seqlens, std::optional<AnyArray> cu_seqlens_k, const BlockMask* block_mask,
           std::optional<AnyArray> block_table, std::optional<AnyArray> seqused_k, bool reference,
           bool check_inputs, std::optional<DeviceArray> k_scale, std::optional<DeviceArray> v_scale,
           const std::string& kv_cache_dtype, uintptr_t stream) {
          const TensorView qv = as_view(q, "q"), ov = as_view(out, "out");
          require(qv.ndim >= 3, "q", "must be [batch, time, heads, head_dim] or packed [total, heads, head_dim], got " +
                                         qv.shape_str());
          const AttentionOptions o = make_attention_options(qv.size(-2), causal, scale, window, softcap, sinks,
                                                  alibi_slopes, block_mask);
          const VarlenInfo vl = make_varlen(cu_seqlens, cu_seqlens_k);
          AttentionProblem p;
          std::vector<std::pair<TensorView, const char*>> scanned{{qv, "q"}};  // a cache's unused rows may be anything
          if (seqused_k) {  // k and v are a KV cache (paged with block_table, else contiguous)
            const int64_t B = cu_seqlens ? vl.num_seqs : qv.shape[0];
            KvCacheView cache{as_kv_cache(as_view(k, "k_cache"), kv_cache_dtype, "k_cache"),
                              as_kv_cache(as_view(v, "v_cache"), kv_cache_dtype, "v_cache"),
                              as_int32(*seqused_k, "seqused_k", B)};
            cache.k_scale = optional_view(k_scale, "k_scale");
            cache.v_scale = optional_view(v_scale, "v_scale");
            if (block_table) cache.block_table = as_block_table(*block_table, B, &cache.max_blocks_per_seq);
            p = make_cached_prefill_problem(qv, cache, ov, o, vl);
          } else {
            require(!block_table, "seqused_k", "is required with block_table (each sequence's key count)");
            refuse_quant_without_cache(k_scale.has_value(), v_scale.has_value(), kv_cache_dtype, "seqused_k");
            const TensorView kv = as_view(k, "k"), vv = as_view(v, "v");
            p = make_prefill_problem(qv, kv, vv, ov, o, vl);
            scanned.insert(scanned.end(), {{kv, "k"}, {vv, "v"}});
          }
          refuse_host_only_options(p.device, reference, check_inputs);
          KernelScope scope;
          if (check_inputs)  // after the problem is built: the scan trusts validated shapes and strides
            for (const auto& [view, name] : scanned) require_finite(view, name);
          const StreamGuard on_stream(stream_of(stream));
          if (reference)
            attention_prefill_reference(p);
          else
            attention_prefill(p);
        },
        nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("causal"), nb::arg("scale").none(),
        nb::arg("window").none(), nb::arg("softcap").none(), nb::arg("sinks").none(),
        nb::arg("alibi_slopes").none(), nb::arg("cu_seqlens").none(), nb::arg("cu_seqlens_k").none(),
        nb::arg("block_mask").none(), nb::arg("block_table").none(), nb::arg("seqused_k").none(),
        nb::arg("reference") = false, nb::arg("check_inputs") = false, nb::arg("k_scale").none() = nb::none(),
        nb::arg("v_scale").none() = nb::none(), nb::arg("kv_cache_dtype") = "auto", nb::arg("stream") = 0);

  m.def("lsh_hash",
        [](const AnyArray& qk, const AnyArray& rotations, const OutArray& buckets, bool check_inputs) {
          const TensorView q = as_view(qk, "qk"), r = as_view(rotations, "rotations");
          const TensorView bk = as_view(buckets, "buckets");
          check_lsh_hash_args(q, r, bk);
          KernelScope scope;
          if (check_inputs) {
            require_finite(q, "qk");
            require_finite(r, "rotations");
          }
          lsh_hash(q, r, bk);
        },
        nb::arg("qk"), nb::arg("rotations"), nb::arg("buckets"), nb::arg("check_inputs") = false);

  m.def("lsh_attention",
        [](const AnyArray& qk, const AnyArray& v, const AnyArray& buckets, const OutArray& out, int64_t chunk_length,
           bool causal, bool reference, bool check_inputs) {
          const TensorView q = as_view(qk, "qk"), vv = as_view(v, "v");
          const LshProblem p = make_lsh_problem(q, vv, as_view(buckets, "buckets"), as_view(out, "out"),
                                                LshOptions{chunk_length, causal});
          KernelScope scope;
          if (check_inputs) {  // after the problem is built: the scan trusts validated shapes and strides
            require_finite(q, "qk");
            require_finite(vv, "v");
          }
          if (reference)
            lsh_attention_reference(p);
          else
            lsh_attention(p);
        },
        nb::arg("qk"), nb::arg("v"), nb::arg("buckets"), nb::arg("out"), nb::arg("chunk_length"), nb::arg("causal"),
        nb::arg("reference") = false, nb::arg("check_inputs") = false);

  m.def("write_kv_paged",
        [](const AnyArray& k_new, std::optional<AnyArray> v_new, const AnyArray& slot_mapping, const OutArray& k_cache,
           std::optional<OutArray> v_cache, std::optional<OutArray> k_scale, std::optional<OutArray> v_scale,
           const std::string& kv_cache_dtype) {
          const TensorView kn = as_view(k_new, "k_new");
          const TensorView kc = as_kv_cache(as_view(k_cache, "k_cache"), kv_cache_dtype, "k_cache");
          const TensorView ks = optional_view(k_scale, "k_scale");
          require(kn.ndim >= 1, "k_new", "must be [tokens, kv_heads, head_dim], got " + kn.shape_str());
          const int64_t* slots = as_int64(slot_mapping, "slot_mapping", kn.shape[0]);
          require(v_new.has_value() == v_cache.has_value(), "v_cache", "v_new and v_cache come together");
          if (!v_new) {
            require(!v_scale, "v_scale", "is only used with v_new and v_cache");
            KernelScope scope;
            write_paged_rows(kn, slots, kc, "k_new", "k_cache", ks, "k_scale");
            return;
          }
          const TensorView vn = as_view(*v_new, "v_new");
          const TensorView vc = as_kv_cache(as_view(*v_cache, "v_cache"), kv_cache_dtype, "v_cache");
          const TensorView vs = optional_view(v_scale, "v_scale");
          KernelScope scope;
          write_kv_paged(kn, vn, slots, kc, vc, ks, vs);
        },
        nb::arg("k_new"), nb::arg("v_new").none(), nb::arg("slot_mapping"), nb::arg("k_cache"),
        nb::arg("v_cache").none(), nb::arg("k_scale").none() = nb::none(), nb::arg("v_scale").none() = nb::none(),
        nb::arg("kv_cache_dtype") = "auto");
}

}  // namespace attnzoo::py
