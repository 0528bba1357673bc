// Bindings for the gated-linear part of the linear family: linear attention, retention, simple GLA, GLA and
// the causal short convolution. The Python wrappers (attnzoo/linear/_gla.py) allocate outputs and states in
// the caller's framework and pass them in. The recurrence's tensors may live in CUDA memory: the recurrent and
// chunked entries run them there (on the caller's stream), the parallel and reference ones refuse them by name.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <tuple>

#include "bindings.h"
#include "core/error.h"
#include "kernels/linear/gla/gla.h"
#include "kernels/linear/linear_attention/linear_attention.h"
#include "kernels/linear/retention/retention.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "kernels/linear/simple_gla/simple_gla.h"

namespace attnzoo::py {
namespace {

FeatureMap feature_map_of(const std::optional<std::string>& name) {
  if (!name || *name == "identity") return FeatureMap::identity;
  if (*name == "elu") return FeatureMap::elu_plus_one;
  if (*name == "relu") return FeatureMap::relu;
  throw ArgumentError("feature_map: expected None, 'elu', 'relu' or 'identity', got '" + *name + "'");
}

ConvActivation activation_of(const std::optional<std::string>& name) {
  if (!name) return ConvActivation::none;
  if (*name == "silu" || *name == "swish") return ConvActivation::silu;
  throw ArgumentError("activation: expected None, 'silu' or 'swish', got '" + *name + "'");
}

void gla_forward(const std::string& family, const std::string& path, const DeviceArray& q, const DeviceArray& k,
                 const DeviceArray& v, std::optional<DeviceArray> g, std::optional<DeviceArray> g_gamma,
                 const DeviceOutArray& o, std::optional<float> scale, std::optional<DeviceArray> initial_state,
                 std::optional<DeviceOutArray> final_state, std::optional<AnyArray> cu_seqlens, int64_t chunk_size,
                 std::optional<std::string> feature_map, bool normalize, std::optional<DeviceArray> initial_z,
                 std::optional<DeviceOutArray> final_z, bool check_values, uintptr_t stream) {
  const TensorView qv = as_view(q, "q"), kv = as_view(k, "k"), vv = as_view(v, "v"), ov = as_view(o, "o");
  LinearAttentionOptions opts;
  opts.scale = scale;
  opts.initial_state = optional_view(initial_state, "initial_state");
  opts.final_state = optional_view(final_state, "final_state");
  std::tie(opts.cu_seqlens, opts.cu_seqlens_len) = seqlens_of(cu_seqlens);
  opts.chunk_size = chunk_size;
  opts.feature_map = feature_map_of(feature_map);
  opts.normalize = normalize;
  opts.initial_z = optional_view(initial_z, "initial_z");
  opts.final_z = optional_view(final_z, "final_z");
  opts.check_values = check_values;
  const TensorView gv = optional_view(g, "g"), gammav = optional_view(g_gamma, "g_gamma");
  const bool chunk = path == "chunk", recurrent = path == "recurrent", reference = path == "reference";
  require(chunk || recurrent || reference || (path == "parallel" && family == "retention"), "path",
          "unknown path '" + path + "'");
  KernelScope scope;
  const StreamGuard on_stream(stream_of(stream));
  if (family == "simple_gla") {
    if (chunk) chunk_simple_gla(qv, kv, vv, gv, gammav, ov, opts);
    if (recurrent) recurrent_simple_gla(qv, kv, vv, gv, gammav, ov, opts);
    if (reference) simple_gla_reference(qv, kv, vv, gv, gammav, ov, opts);
  } else if (family == "gla") {
    if (chunk) chunk_gla(qv, kv, vv, gv, ov, opts);
    if (recurrent) recurrent_gla(qv, kv, vv, gv, ov, opts);
    if (reference) gla_reference(qv, kv, vv, gv, ov, opts);
  } else if (family == "retention") {
    if (chunk) chunk_retention(qv, kv, vv, ov, opts);
    if (recurrent) recurrent_retention(qv, kv, vv, ov, opts);
    if (reference) retention_reference(qv, kv, vv, ov, opts);
    if (path == "parallel") parallel_retention(qv, kv, vv, ov, opts);
  } else if (family == "linear_attn") {
    if (chunk) chunk_linear_attn(qv, kv, vv, ov, opts);
    if (recurrent) recurrent_linear_attn(qv, kv, vv, ov, opts);
    if (reference) linear_attn_reference(qv, kv, vv, ov, opts);
  } else {
    throw ArgumentError("family: unknown '" + family + "'");
  }
}

}  // namespace

void bind_linear_gla(nb::module_& m) {
  m.def("gla_forward", &gla_forward, nb::arg("family"), nb::arg("path"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
        nb::arg("g").none(), nb::arg("g_gamma").none(), nb::arg("o"), nb::arg("scale").none(),
        nb::arg("initial_state").none(), nb::arg("final_state").none(), nb::arg("cu_seqlens").none(),
        nb::arg("chunk_size"), nb::arg("feature_map").none(), nb::arg("normalize"), nb::arg("initial_z").none(),
        nb::arg("final_z").none(), nb::arg("check_values") = true, nb::arg("stream") = 0,
        "Gated linear recurrence (family: simple_gla, gla, retention, linear_attn; path: chunk, recurrent, "
        "reference, parallel). See attnzoo.linear.");
  m.def("causal_conv1d",
        // The prefill also runs CUDA tensors (on the caller's `stream`); the reference refuses them by name.
        [](const DeviceArray& x, const DeviceArray& weight, std::optional<DeviceArray> bias, const DeviceOutArray& y,
           std::optional<DeviceArray> initial_state, std::optional<DeviceOutArray> final_state,
           std::optional<std::string> activation, std::optional<AnyArray> cu_seqlens, bool reference,
           uintptr_t stream) {
          CausalConv1dOptions opts;
          opts.bias = optional_view(bias, "bias");
          opts.initial_state = optional_view(initial_state, "initial_state");
          opts.final_state = optional_view(final_state, "final_state");
          opts.activation = activation_of(activation);
          std::tie(opts.cu_seqlens, opts.cu_seqlens_len) = seqlens_of(cu_seqlens);
          const TensorView xv = as_view(x, "x"), wv = as_view(weight, "weight"), yv = as_view(y, "y");
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          if (reference)
            causal_conv1d_reference(xv, wv, yv, opts);
          else
            causal_conv1d(xv, wv, yv, opts);
        },
        nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("y"), nb::arg("initial_state").none(),
        nb::arg("final_state").none(), nb::arg("activation").none(), nb::arg("cu_seqlens").none(),
        nb::arg("reference") = false, nb::arg("stream") = 0);
  m.def("causal_conv1d_update",
        // The decode step also runs CUDA tensors (on the caller's `stream`).
        [](const DeviceArray& x, const DeviceOutArray& conv_state, const DeviceArray& weight,
           std::optional<DeviceArray> bias, const DeviceOutArray& y, std::optional<std::string> activation,
           uintptr_t stream) {
          const TensorView xv = as_view(x, "x"), sv = as_view(conv_state, "conv_state"), wv = as_view(weight, "weight"),
                           bv = bias ? as_view(*bias, "bias") : TensorView{}, yv = as_view(y, "y");
          const ConvActivation act = activation_of(activation);
          KernelScope scope;
          const StreamGuard on_stream(stream_of(stream));
          causal_conv1d_update(xv, sv, wv, bv, yv, act);
        },
        nb::arg("x"), nb::arg("conv_state"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("y"),
        nb::arg("activation").none(), nb::arg("stream") = 0);
}

}  // namespace attnzoo::py
