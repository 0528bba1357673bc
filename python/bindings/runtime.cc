// Process-wide runtime switches: how linear-attention / SSM mixers run prompt chunks (chunked kernels, or their
// recurrent kernels token by token, for `attnzoo bench model --linear-prefill=recurrent`), and the precision
// of prefill projections (torch.set_float32_matmul_precision's names).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "core/batch_invariance.h"
#include "core/dispatch_timeline.h"
#include "core/error.h"
#include "layers/linear.h"
#include "layers/linear_bf16_pairs_route.h"
#include "layers/linear_prefill_mode.h"
#include "layers/matmul_precision.h"

namespace attnzoo::py {

namespace {
thread_local std::unique_ptr<DispatchTimeline> t_timeline;  // the recording this Python thread started
}  // namespace

void bind_runtime(nb::module_& m) {
  m.def("timeline_start", [] {
          if (t_timeline) throw ArgumentError("timeline: this thread is already recording");
          t_timeline = std::make_unique<DispatchTimeline>();
        },
        "Starts recording the pool jobs this thread submits (bench model --timeline).");
  m.def("timeline_stop", [] {
          if (!t_timeline) throw ArgumentError("timeline: this thread is not recording (call timeline_start first)");
          std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, bool>> out;
          for (const DispatchRecord& r : t_timeline->stop()) out.emplace_back(r.op, r.start_ns, r.end_ns, r.tasks, r.parallel);
          t_timeline.reset();
          return out;
        },
        "Stops recording; one (op, start_ns, end_ns, tasks, parallel) per job, in submission order.");
  m.def("set_linear_prefill",
        [](const std::string& mode) { set_linear_prefill_mode(parse_linear_prefill_mode(mode)); }, nb::arg("mode"),
        "'chunked' (default) or 'recurrent': how linear/SSM mixers run prompt chunks, for the whole process.");
  m.def("linear_prefill", [] { return std::string(linear_prefill_mode_name(linear_prefill_mode())); },
        "The current linear prefill mode: 'chunked' or 'recurrent'.");
  m.def("set_float32_matmul_precision",
        [](const std::string& p) { set_matmul_precision(parse_matmul_precision(p)); }, nb::arg("precision"),
        "'auto' (default: each projection at its weights' precision: block-quantized weights and weights "
        "loaded as bfloat16 take the reduced products of 'medium', f32 weights f32 products), 'highest' (f32 "
        "products everywhere), 'high' (the same on CPU) or 'medium' (reduced products everywhere: projections of "
        "several tokens round activations and weights to bf16 and accumulate in f32 on AMX or AVX-512-BF16 CPUs, "
        "quantized decode GEMVs take 8-bit activations), for the whole process.");
  // The projection GEMM of prefill on one backend, for the kernel benchmark and tests: y [T, N] = x [T, K] w^T.
  m.def("linear_gemm",
        [](const AnyArray& w, const AnyArray& x, const OutArray& y, const std::string& backend) {
          const TensorView wv = as_view(w, "w"), xv = as_view(x, "x"), yv = as_view(y, "y");
          require(wv.ndim == 2 && wv.is_contiguous() && (wv.dtype == DType::f32 || wv.dtype == DType::bf16), "w",
                  "expected a contiguous [N, K] float32 or bfloat16 array");
          const int64_t N = wv.shape[0], K = wv.shape[1];
          require(xv.ndim == 2 && xv.shape[1] == K && xv.dtype == DType::f32 && xv.is_contiguous(), "x",
                  "expected a contiguous [T, " + std::to_string(K) + "] float32 array");
          const int64_t T = xv.shape[0];
          require(yv.ndim == 2 && yv.shape[0] == T && yv.shape[1] == N && yv.dtype == DType::f32 && yv.is_contiguous(),
                  "y", "expected a contiguous [" + std::to_string(T) + ", " + std::to_string(N) + "] float32 array");
          LinearGemmBackend b = LinearGemmBackend::openblas;
          if (backend == "bf16_dot") b = LinearGemmBackend::bf16_dot;
          else if (backend == "tile") b = LinearGemmBackend::tile;
          else require(backend == "openblas", "backend", "expected 'openblas', 'tile' or 'bf16_dot', got '" + backend + "'");
          KernelScope scope;
          linear_gemm(wv, nullptr, xv.ptr<float>(), T, yv.ptr<float>(), N, b);
        },
        nb::arg("w"), nb::arg("x"), nb::arg("y"), nb::arg("backend") = "openblas",
        "y = x w^T with the prefill GEMM backend 'openblas' (f32 products), 'tile' or 'bf16_dot' (bf16 products on "
        "AMX tiles where they run, else vdpbf16ps; ValueError without AVX-512-BF16).");
  m.def("linear_bf16_gemm_counts", [] {
    const LinearBf16GemmCounts c = linear_bf16_gemm_counts();
    return std::make_pair(c.amx, c.vdpbf16ps);
  }, "(AMX, vdpbf16ps): the bf16-products projection GEMMs run so far in this process on each engine.");
  m.def("linear_bf16_straight_pairs", [] { return linear_bf16_gemm_counts().straight_pairs; },
        "Regrouped row ranges the bf16 prefill GEMM (or QuantWeights.bf16_pairs) decoded straight into bf16 pairs "
        "so far in this process, not through f32.");
  m.def("linear_bf16_allow_straight_pairs", &linear_bf16_allow_straight_pairs, nb::arg("allow"),
        "False: regrouped rows take the f32 route to bf16 pairs (dequantize, then pack), the same bits; the kernel "
        "bench times the two routes so. Process-wide: set it between calls, on the thread that makes them.");
  m.def("linear_bf16_straight_pairs_allowed", &linear_bf16_straight_pairs_allowed,
        "Whether regrouped rows may go straight into bf16 pairs (true unless turned off).");
  m.def("set_linear_prompt_int8", [](const std::string& mode) {
    if (mode == "auto") return set_linear_prompt_int8_rows(PromptInt8Rows::automatic);
    if (mode == "off") return set_linear_prompt_int8_rows(PromptInt8Rows::off);
    if (mode == "on") return set_linear_prompt_int8_rows(PromptInt8Rows::on);
    throw ArgumentError("mode: expected 'auto', 'off' or 'on', got '" + mode + "'");
  }, nb::arg("mode"),
        "Which prompts (more than 8 tokens) over block weights with reduced products take the 8-bit integer rows "
        "instead of the bf16 / f32 panels: 'auto' (the rule of layers/prompt_int8_route.h: the VNNI rows at every "
        "length without AMX (Q6_K up to 48 tokens against bf16 panels), the AVX2 rows at every length but Q5_0 / "
        "Q5_1 up to 32-48 tokens, never the portable rows or on AMX), 'off' (none), 'on' (every format that has them). Process-wide; ATTNZOO_PROMPT_INT8 "
        "(auto / 0 / 1) sets the start.");
  m.def("linear_prompt_int8", [] {
    const PromptInt8Rows m = linear_prompt_int8_rows();
    return std::string(m == PromptInt8Rows::automatic ? "auto" : m == PromptInt8Rows::off ? "off" : "on");
  }, "The prompt route setting: 'auto', 'off' or 'on' (set_linear_prompt_int8).");
  m.def("set_batch_invariant", [](bool on) { set_batch_invariant(on); }, nb::arg("on"),
        "Batch-invariant numerics for the whole process (core/batch_invariance.h): a token's logits do not "
        "depend on the batch, the chunking of its prompt or the prefix cache.");
  m.def("batch_invariant", [] { return batch_invariant(); }, "Whether batch-invariant numerics are on.");
  m.def("get_float32_matmul_precision", [] { return std::string(matmul_precision_name(matmul_precision())); },
        "The current matmul precision: 'auto', 'highest', 'high' or 'medium'.");
}

}  // namespace attnzoo::py
