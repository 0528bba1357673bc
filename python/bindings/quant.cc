// Block-quantized weights (GGUF formats): the format table, dequantization of raw bytes, and the quantized
// projection y = x w^T on each of its kernels, for tests against gguf-py; QuantWeights, raw blocks prepared once
// (attnzoo.quant.prepare: a model's Linear, or the integer rows alone), which the kernel benchmark times; and
// Avx2GroupRows, the bench's way to the AVX2 regrouped rows in either form.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "core/aligned_buffer.h"
#include "core/bf16_dot.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/quant/avx2_group_rows_scope.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/row_groups.h"
#include "layers/linear.h"
#include "layers/linear_bf16_pairs_route.h"

namespace attnzoo::py {
namespace {

QuantType quant_type_arg(uint32_t id) {
  const auto info = quant_type_info(id);
  require(info.has_value(), "qtype", "unknown GGUF type id " + std::to_string(id));
  return info->type;
}

// The bytes of a contiguous uint8 array as a [rows, cols] matrix of `type`: exactly that many, since extra bytes
// mean the caller's shape or type is not the data's.
QuantMatrix bytes_arg(const AnyArray& a, const char* name, QuantType type, int64_t rows, int64_t cols) {
  const TensorView v = as_view(a, name);
  require(v.dtype == DType::u8 && v.is_contiguous(), name, "expected a contiguous uint8 array of raw blocks");
  const QuantMatrix m = make_quant_matrix(v.data, uint64_t(v.numel()), type, rows, cols, name);
  require(uint64_t(v.numel()) == m.bytes(), name,
          std::to_string(v.numel()) + " bytes given, but [" + std::to_string(rows) + ", " + std::to_string(cols) +
              "] " + quant_type_name(type) + " takes exactly " + std::to_string(m.bytes()) + " (trailing bytes)");
  return m;
}

TensorView f32_matrix(const TensorView& v, const char* name, int64_t rows, int64_t cols) {
  require(v.ndim == 2 && v.shape[0] == rows && v.shape[1] == cols && v.dtype == DType::f32 && v.is_contiguous(), name,
          "expected a contiguous [" + std::to_string(rows) + ", " + std::to_string(cols) + "] float32 array");
  return v;
}

// The matrix the integer rows (quant_gemv) read, as a model's Linear holds it: regrouped 16 rows at a time into
// a copy where the AVX-512 VNNI or AVX2 rows run (row_groups_pay), so that this path and "auto"'s decode rows run
// one kernel; else the caller's rows. (The raw rows' kernel sums a row's blocks across lanes, the regrouped one
// block after block, so their last bits differ.)
struct Int8Rows {
  QuantMatrix held;
  AlignedBuffer<uint8_t> grouped;  // empty where the caller's rows are read
};

Int8Rows int8_rows(const QuantMatrix& w) {
  require(quant_gemv_has_int8(w.type), "path", std::string("'int8': no integer kernel for ") + quant_type_name(w.type));
  Int8Rows r{w, {}};
  if (row_groups_pay(w)) {
    r.grouped.resize(size_t(w.bytes()));
    r.held = to_row_groups(w, r.grouped.data());
  }
  return r;
}

// A projection's weights prepared once (attnzoo.quant.prepare), as a model's loader prepares them, for the path
// chosen: "auto", a Linear over the caller's raw blocks, regrouped or aligned into a copy of its own where this
// CPU's kernels want one, whose products follow the matmul precision; or "int8", the integer rows alone over
// int8_rows' matrix whatever the token count. Each product then runs the kernel alone, so a decode GEMV is timed
// and used without the load-time copy. The caller's array is never released or changed; it is kept alive while
// it is read in place.
struct QuantWeights {
  std::string path;
  Linear linear;  // "auto"
  Int8Rows int8;  // "int8"
  uint32_t qtype = 0;
  std::optional<AnyArray> borrowed;  // the caller's array, while it is read in place

  bool owns() const { return path == "int8" ? int8.grouped.size() > 0 : linear.owns_weight(); }
  int64_t n() const { return path == "int8" ? int8.held.rows : linear.out_features(); }
  int64_t k() const { return path == "int8" ? int8.held.cols : linear.in_features(); }
  uint64_t weight_bytes() const { return path == "int8" ? int8.held.bytes() : linear.weight_bytes(); }
  // A regrouped copy stands in for every byte of the caller's rows.
  uint64_t replaced_source_bytes() const {
    return path == "int8" ? (owns() ? int8.held.bytes() : 0) : linear.replaced_source_bytes();
  }
};

QuantWeights prepare_weights(const AnyArray& w, uint32_t qtype, int64_t n, int64_t k, const std::string& path) {
  require(path == "auto" || path == "int8", "path", "expected 'auto' or 'int8', got '" + path + "'");
  const QuantMatrix m = bytes_arg(w, "w", quant_type_arg(qtype), n, k);
  QuantWeights q;
  q.path = path;
  q.qtype = qtype;
  {
    KernelScope scope;
    if (path == "int8")
      q.int8 = int8_rows(m);
    else
      q.linear = Linear::from_matrix(m, {}, "w");
  }
  if (!q.owns()) q.borrowed = w;
  return q;
}

// y [T, N] = x [T, K] w^T over weights prepared for `path`; x and y checked against the weights' shape.
void prepared_matmul(const QuantWeights& q, const AnyArray& x, const OutArray& y) {
  const int64_t N = q.n(), K = q.k();
  const TensorView xv = as_view(x, "x");
  require(xv.ndim == 2 && xv.shape[1] == K && xv.dtype == DType::f32 && xv.is_contiguous(), "x",
          "expected a contiguous [T, " + std::to_string(K) + "] float32 array");
  const int64_t T = xv.shape[0];
  const TensorView yv = as_view(y, "out");
  require(yv.ndim == 2 && yv.shape[0] == T && yv.shape[1] == N && yv.dtype == DType::f32 && yv.is_contiguous(),
          "out", "expected a contiguous [" + std::to_string(T) + ", " + std::to_string(N) + "] float32 array");
  KernelScope scope;
  if (q.path == "int8")
    quant_gemv(q.int8.held, nullptr, xv.ptr<float>(), T, yv.ptr<float>(), N);
  else
    q.linear.forward(xv.ptr<float>(), T, yv.ptr<float>());
}

// out [n, ceil(k / 2)] (int32, each a pair of bf16 values) = the prepared Linear's rows as the bf16 prefill GEMM
// converts them (straight into pairs or through f32: linear_bf16_allow_straight_pairs), 64 rows per pool task: the
// conversion alone, which the kernel bench times.
void prepared_bf16_pairs(const QuantWeights& q, const OutArray& out) {
  require(q.path == "auto", "path", "bf16 pairs come from the 'auto' path's weights, these are '" + q.path + "'");
  require(bf16_dot_available(), "target",
          std::string("the bf16 prefill GEMM needs the avx512_bf16 target, this process runs ") +
              target_name(active_target()));
  const QuantMatrix& w = q.linear.matrix();
  const int64_t N = w.rows, K2 = (w.cols + 1) / 2;
  const TensorView o = as_view(out, "out");
  require(o.ndim == 2 && o.shape[0] == N && o.shape[1] == K2 && o.dtype == DType::i32 && o.is_contiguous(), "out",
          [&] { return "expected a contiguous [" + std::to_string(N) + ", " + std::to_string(K2) + "] int32 array"; });
  uint32_t* const pairs = static_cast<uint32_t*>(o.data);
  constexpr int64_t kRowsPerTask = 64;
  KernelScope scope;
  ThreadPool::global().parallel_for((N + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task, int) {
    const int64_t n0 = task * kRowsPerTask, nb = std::min(N, n0 + kRowsPerTask) - n0;
    linear_bf16_weight_pairs(w, n0, nb, pairs + n0 * K2, size_t(K2));
  });
}

Avx2LaneSums lane_sums_arg(const std::string& name) {
  require(name == "vpmaddubsw" || name == "vpdpbusd", "lane_sums",
          "expected 'vpmaddubsw' or 'vpdpbusd', got '" + name + "'");
  return name == "vpdpbusd" ? Avx2LaneSums::vpdpbusd : Avx2LaneSums::vpmaddubsw;
}

// Python's `with` over Avx2GroupRowsScope: held from __enter__ to __exit__.
struct Avx2GroupRows {
  std::optional<Avx2GroupRowsScope> scope;
};

// The 8-bit activation quantization of the integer rows with buffers held, for the kernel bench's side-by-side
// section (bench/act_quant.py): "all" writes every array as each VNNI / AVX2 call did before the routes took only
// theirs (the int16 copy, the 8-bit rows, the per-lane scales and, in a second pass, the lane sums), "gguf" what
// those rows over GGUF blocks read (no int16 copy), "regrouped" what the regrouped rows read (the 8-bit rows and
// the block sums).
struct ActivationQuantizer {
  int64_t T, K;
  size_t ld8;
  AlignedBuffer<int16_t> q;
  AlignedBuffer<float> d, dsum16, dsum32, dx8, dxsum4;
  AlignedBuffer<int8_t> xs8;
  AlignedBuffer<int32_t> xsum16, neg8, neg128;

  ActivationQuantizer(int64_t t, int64_t k) : T(t), K(k), ld8(size_t(k + 63) / 64 * 64) {
    require(t > 0, "T", "expected a positive token count, got " + std::to_string(t));
    require(k > 0 && k % 32 == 0, "K", "expected a positive multiple of 32, got " + std::to_string(k));
    require(quant_gemv_avx2_enabled(), "target", "the 8-bit rows need an AVX2 or AVX-512 target");
    const size_t rows = size_t(t), lanes = rows * ld8 / 4;
    q.resize(rows * size_t(k));
    for (auto* b : {&d, &dsum32}) b->resize(rows * size_t(k / 32));
    dsum16.resize(rows * size_t(k / 16));
    xsum16.resize(rows * size_t(k / 16));
    xs8.resize(rows * ld8);
    for (auto* b : {&dx8, &dxsum4}) b->resize(lanes);
    for (auto* b : {&neg8, &neg128}) b->resize(lanes);
  }

  void run(const AnyArray& x, const std::string& arrays) {
    require(arrays == "all" || arrays == "gguf" || arrays == "regrouped", "arrays",
            "expected 'all', 'gguf' or 'regrouped', got '" + arrays + "'");
    const TensorView v = as_view(x, "x");
    require(v.dtype == DType::f32 && v.is_contiguous() && v.numel() == T * K, "x",
            "expected a contiguous float32 array of T x K = " + std::to_string(T * K) + " values");
    const bool lanes = arrays != "regrouped";
    const QuantActivationsOut o{.q = arrays == "all" ? q.data() : nullptr,
                                .d = d.data(),
                                .dsum16 = dsum16.data(),
                                .dsum32 = dsum32.data(),
                                .xsum16 = xsum16.data(),
                                .xs8 = xs8.data(),
                                .dx8 = lanes ? dx8.data() : nullptr,
                                .xsum4_neg8 = lanes ? neg8.data() : nullptr,
                                .xsum4_neg128 = lanes ? neg128.data() : nullptr,
                                .dxsum4 = lanes ? dxsum4.data() : nullptr,
                                .ld8 = ld8};
    KernelScope scope;
    quantize_activations(v.ptr<float>(), size_t(T), size_t(K), o);
    if (lanes && quant_gemv_vnni_enabled()) quant_vnni_lane_sums(size_t(T), o);
    if (lanes && !quant_gemv_vnni_enabled()) quant_avx2_lane_sums(size_t(T), o);
  }

  // The arrays every form writes (the 8-bit rows, d, the sums), as bytes: the forms must agree on them.
  nb::bytes common() const {
    std::string out;
    auto add = [&](const auto& b) { out.append(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(b[0])); };
    add(xs8);
    add(d);
    add(dsum16);
    add(dsum32);
    add(xsum16);
    return nb::bytes(out.data(), out.size());
  }
};

}  // namespace

void bind_quant(nb::module_& m) {
  nb::class_<ActivationQuantizer>(m, "ActivationQuantizer",
                                  "The integer rows' 8-bit activation quantization of T x K values, buffers held "
                                  "(the kernel bench's side by side).")
      .def(nb::init<int64_t, int64_t>(), nb::arg("T"), nb::arg("K"))
      .def("run", &ActivationQuantizer::run, nb::arg("x"), nb::arg("arrays"),
           "Quantizes x [T, K] into the arrays a route reads: 'all' (every array, the lane sums in a second pass: "
           "what each VNNI / AVX2 call wrote before), 'gguf' (no int16 copy) or 'regrouped' (the 8-bit rows and "
           "the block sums).")
      .def("common", &ActivationQuantizer::common, "The 8-bit rows, d and the sums as bytes (every form's).");
  m.def("quant_type_info",
        [](uint32_t id) -> std::optional<std::tuple<std::string, int64_t, int64_t>> {
          const auto info = quant_type_info(id);
          if (!info) return std::nullopt;
          return std::make_tuple(std::string(info->name), info->block_elems, info->block_bytes);
        },
        nb::arg("qtype"), "(name, block elements, block bytes) of a GGUF type id, or None for an unknown id.");
  m.def("quant_supported", [](uint32_t id) { return quant_supported(quant_type_arg(id)); }, nb::arg("qtype"));
  m.def("dequantize",
        [](const AnyArray& data, uint32_t qtype, const OutArray& out, bool reference) {
          const QuantType type = quant_type_arg(qtype);
          const TensorView o = as_view(out, "out");
          require(o.dtype == DType::f32 && o.is_contiguous(), "out", "expected a contiguous float32 array");
          if (o.numel() == 0) {  // no values: no blocks (a QuantMatrix has at least one)
            const int64_t bytes = as_view(data, "data").numel();
            require(bytes == 0, "data", std::to_string(bytes) + " bytes given, but 0 " + quant_type_name(type) +
                                            " values take exactly 0 (trailing bytes)");
            return;
          }
          const QuantMatrix w = bytes_arg(data, "data", type, 1, o.numel());
          KernelScope scope;
          if (reference)
            dequantize_row_reference(type, w.data, o.ptr<float>(), w.cols);
          else
            dequantize_row(type, w.data, o.ptr<float>(), w.cols);
        },
        nb::arg("data"), nb::arg("qtype"), nb::arg("out"), nb::arg("reference") = false,
        "out (float32, n elements) = the n values whose raw blocks of GGUF type `qtype` are `data`.");
  m.def("quantize",
        [](const AnyArray& x, uint32_t qtype, const std::optional<AnyArray>& importance, const OutArray& out) {
          const QuantType type = quant_type_arg(qtype);
          const TensorView xv = as_view(x, "x");
          require(xv.ndim == 2 && xv.dtype == DType::f32 && xv.is_contiguous(), "x",
                  "expected a contiguous [rows, cols] float32 array");
          require(xv.shape[1] > 0, "x", std::string("rows of 0 values hold no ") + quant_type_name(type) + " block");
          const float* imp = nullptr;
          if (importance) {
            const TensorView iv = as_view(*importance, "importance");
            require(iv.ndim == 1 && iv.shape[0] == xv.shape[1] && iv.dtype == DType::f32 && iv.is_contiguous(),
                    "importance", "expected a contiguous float32 array of " + std::to_string(xv.shape[1]) + " values");
            imp = iv.ptr<float>();
            require_importance(imp, iv.shape[0], "importance");  // quantize_matrix's would name x, its matrix
          }
          const TensorView o = as_view(out, "out");
          std::vector<uint8_t> bytes;
          {
            KernelScope scope;
            bytes = quantize_matrix(type, xv.ptr<float>(), xv.shape[0], xv.shape[1], imp, "x");
          }
          require(o.dtype == DType::u8 && o.is_contiguous() && uint64_t(o.numel()) == bytes.size(), "out",
                  "expected a contiguous uint8 array of " + std::to_string(bytes.size()) + " bytes");
          std::memcpy(o.data, bytes.data(), bytes.size());
        },
        nb::arg("x"), nb::arg("qtype"), nb::arg("importance").none(), nb::arg("out"),
        "out (uint8) = the GGUF blocks of type `qtype` for x [rows, cols] float32 (importance: cols weights).");
  m.def("quant_matmul",
        [](const AnyArray& w, uint32_t qtype, int64_t N, int64_t K, const AnyArray& x, const OutArray& y,
           const std::string& path) {
          const QuantType type = quant_type_arg(qtype);
          const QuantMatrix wm = bytes_arg(w, "w", type, N, K);
          const TensorView xv = as_view(x, "x");
          require(xv.ndim == 2, "x", "expected a [T, " + std::to_string(K) + "] float32 array");
          const int64_t T = xv.shape[0];
          f32_matrix(xv, "x", T, K);
          const TensorView yv = f32_matrix(as_view(y, "y"), "y", T, N);
          const float* xp = xv.ptr<float>();
          float* yp = yv.ptr<float>();
          KernelScope scope;
          if (path == "int8") {
            const Int8Rows rows = int8_rows(wm);
            quant_gemv(rows.held, nullptr, xp, T, yp, N);
          } else if (path == "f32") {
            quant_gemv_f32(wm, nullptr, xp, T, yp, N);
          } else {
            require(path == "reference", "path", "expected 'int8', 'f32' or 'reference', got '" + path + "'");
            quant_matmul_reference(wm, nullptr, xp, T, yp, N);
          }
        },
        nb::arg("w"), nb::arg("qtype"), nb::arg("n"), nb::arg("k"), nb::arg("x"), nb::arg("y"), nb::arg("path"),
        "y [T, n] = x [T, k] w^T with w n rows of raw GGUF blocks, on one kernel whatever the token count. path: "
        "'int8' (8-bit activations, integer dots), 'f32' (rows dequantized, f32 dots) or 'reference' (double "
        "accumulation). Weights prepared once for 'int8' or a model's Linear (the 'auto' path) are QuantWeights.");
  nb::class_<QuantWeights>(m, "QuantWeights", "A projection's raw GGUF blocks prepared once, as a model holds them.")
      .def("__init__",
           [](QuantWeights* self, const AnyArray& w, uint32_t qtype, int64_t n, int64_t k, const std::string& path) {
             new (self) QuantWeights(prepare_weights(w, qtype, n, k, path));
           },
           nb::arg("w"), nb::arg("qtype"), nb::arg("n"), nb::arg("k"), nb::arg("path") = "auto",
           "w: n rows of raw blocks of GGUF type `qtype` (exactly n x k values' bytes), regrouped or aligned "
           "into a copy of its own where this CPU's kernels read such a copy, else borrowed as they are. path: "
           "'auto' (a model's Linear, under the matmul precision) or 'int8' (8-bit activations, integer dots, "
           "whatever the token count).")
      .def("matmul", &prepared_matmul, nb::arg("x"), nb::arg("out"),
           "out [T, n] = x [T, k] w^T on the prepared path.")
      .def("bf16_pairs", &prepared_bf16_pairs, nb::arg("out"),
           "out [n, ceil(k / 2)] int32 = the 'auto' weights' rows as the bf16 prefill GEMM converts them to bf16 "
           "pairs (ValueError naming target without AVX-512-BF16).")
      .def_prop_ro("path", [](const QuantWeights& q) { return q.path; })
      .def_prop_ro("n", &QuantWeights::n)
      .def_prop_ro("k", &QuantWeights::k)
      .def_prop_ro("qtype", [](const QuantWeights& q) { return q.qtype; })
      .def_prop_ro("weight_bytes", &QuantWeights::weight_bytes, "The bytes one product reads.")
      .def_prop_ro("owned_bytes", [](const QuantWeights& q) { return q.owns() ? q.weight_bytes() : 0; },
                   "The bytes of the copy held (0 when w is read where it lies).")
      .def_prop_ro("replaced_source_bytes", &QuantWeights::replaced_source_bytes,
                   "The bytes of w the copy stands in for (w itself is left as it was).");
  nb::class_<Avx2GroupRows>(m, "Avx2GroupRows",
                            "with Avx2GroupRows() as rows: the AVX2 regrouped rows run the products of the block, "
                            "on vpmaddubsw until rows.use('vpdpbusd'); the target and the AVX-VNNI switch are "
                            "given back as they were on leaving it. For the kernel bench, on its calling thread.")
      .def(nb::init<>())
      .def("__enter__",
           [](Avx2GroupRows& r) -> Avx2GroupRows& {
             require(!r.scope, "Avx2GroupRows", "already entered");
             r.scope.emplace();
             return r;
           },
           nb::rv_policy::reference)
      .def("__exit__", [](Avx2GroupRows& r, nb::args) { r.scope.reset(); })
      .def("use",
           [](Avx2GroupRows& r, const std::string& lane_sums) {
             const Avx2LaneSums form = lane_sums_arg(lane_sums);
             require(r.scope.has_value(), "Avx2GroupRows", "use() outside its with block");
             r.scope->use(form);
           },
           nb::arg("lane_sums"), "'vpmaddubsw' or 'vpdpbusd' (ValueError naming lane_sums where it cannot run).")
      .def_static("support",
                  [] {
                    const Avx2GroupRowsSupport s = avx2_group_rows_support();
                    nb::dict d;
                    d["avx2"] = s.avx2;
                    d["vpdpbusd"] = s.vpdpbusd;
                    d["skipped"] = s.skipped;
                    return d;
                  },
                  "{'avx2', 'vpdpbusd': whether each can run, 'skipped': why not ('' when both can)}.");
  m.def("quant_avx_vnni_tasks", &quant_gemv_groups_avx_vnni_tasks,
        "Tasks the AVX2 regrouped rows ran on vpdpbusd in this process (what the bench and tests observe).");
  m.def("quant_avx_vnni_allowed", &quant_gemv_groups_avx_vnni_allowed,
        "Whether the AVX2 regrouped rows may take vpdpbusd (false only inside an Avx2GroupRows block on "
        "vpmaddubsw, or a test's hook).");
}

}  // namespace attnzoo::py
