#include "bench/cuda_layer_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "core/error.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/quant.h"
#include "layers/cuda/delta_gates_cuda.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/cuda/transpose_cuda.h"
#include "layers/sequence_schedule.h"

namespace attnzoo::bench {
namespace {

const QuantType kDequantFormats[] = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1,
                                     QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K};

QuantType dequant_format_of(const LinearCase& c) {
  for (QuantType t : kDequantFormats)
    if (c.kernel == std::string("dequant_") + quant_type_name(t)) return t;
  throw ArgumentError("kernel: " + c.kernel + " is not a dequant case");
}

LinearRow dequant_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t rows = c["rows"], cols = c["cols"], row_bytes = c["row_bytes"];
    // bf16 noise read as blocks: finite or not, every block decodes with the same operations.
    const DeviceBuffer w = noise_buffer(device, size_t(rows * row_bytes), 91, stream);
    const DeviceBuffer y(device, size_t(rows * cols) * 2);
    QuantMatrix m;
    m.data = w.data(), m.type = dequant_format_of(c), m.rows = rows, m.cols = cols, m.row_bytes = row_bytes;
    if (!device.is_cuda()) {
      std::vector<float> row(static_cast<size_t>(cols));
      return timer([&] {
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row_reference(m.type, m.row(r), row.data(), cols);
          for (int64_t i = 0; i < cols; ++i) y.as<uint16_t>()[r * cols + i] = f32_to_bf16(row[size_t(i)]);
        }
      });
    }
    const QuantDequantProblem p = make_quant_dequant_cuda_problem(m, device, view_on(y, DType::bf16, {rows, cols}));
#if ATTNZOO_WITH_CUDA
    return timer([&] { quant_dequant_cuda(p, stream); });
#else
    (void)p;
    throw DeviceError("dequant: this build has no CUDA");
#endif
  });
}

LinearRow delta_gates_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t T = c["T"], Nb = c["Nb"], Ng = c["Ng"], group = c["group"];
    // b and a as the runner reads them: column slices of one projection row [T, Nb + Ng] (f32).
    const DeviceBuffer ba = f32_buffer(device, size_t(T * (Nb + Ng)), 0.5f, stream);
    const DeviceBuffer neg_A = f32_buffer(device, size_t(Ng / group), -1.f, stream);
    const DeviceBuffer dt_bias = f32_buffer(device, size_t(Ng), 0.25f, stream);
    const DeviceBuffer g(device, size_t(T * Ng) * 4), beta(device, size_t(T * Nb) * 4);
    DeltaGates x;
    x.b = view_on(ba, DType::f32, {T, Nb});
    x.b.strides[0] = Nb + Ng;
    x.a = x.b;
    x.a.data = ba.as<float>() + Nb;
    x.a.shape[1] = Ng;
    x.neg_A = view_on(neg_A, DType::f32, {Ng / group}), x.dt_bias = view_on(dt_bias, DType::f32, {Ng});
    x.g = view_on(g, DType::f32, {T, Ng}), x.beta = view_on(beta, DType::f32, {T, Nb});
    if (!device.is_cuda()) {
      // The mixers' loops (gated_deltanet_mixer.cc, kda_mixer.cc).
      return timer([&] {
        const float *b = ba.as<float>(), *A = neg_A.as<float>(), *bias = dt_bias.as<float>();
        for (int64_t t = 0; t < T; ++t) {
          const float* row = b + t * (Nb + Ng);
          for (int64_t j = 0; j < Ng; ++j) g.as<float>()[t * Ng + j] = A[j / group] * softplus(row[Nb + j] + bias[j]);
          for (int64_t h = 0; h < Nb; ++h) beta.as<float>()[t * Nb + h] = 1.f / (1.f + std::exp(-row[h]));
        }
      });
    }
    check_delta_gates_cuda(x);
#if ATTNZOO_WITH_CUDA
    return timer([&] { delta_gates_cuda(x, stream); });
#else
    throw DeviceError("delta gates: this build has no CUDA");
#endif
  });
}

// The element-wise kernels' CPU twins: the loops of the CPU forwards they stand for, over f32 / bf16 values.
void host_elementwise(const LinearCase& c, const TensorView& a, const TensorView& b, const TensorView& y,
                      const int32_t* index) {
  const int64_t rows = c["rows"], cols = c["cols"];
  const std::string& k = c.kernel;
  auto at = [&](const TensorView& t, int64_t i) { return load_as_f32(t.data, t.dtype, i); };
  const float* src = static_cast<const float*>(a.data);
  float* dst = static_cast<float*>(y.data);
  if (k == "transpose") {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < cols; ++i) dst[i * rows + r] = src[r * cols + i];
    return;
  }
  if (k == "row_copy") {
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(src + int64_t(index[r]) * cols, cols, dst + r * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) {
      const int64_t q = r * cols + i;
      float v;
      if (k == "mul") v = at(a, q) * at(b, q);
      else if (k == "sigmoid_gate") v = at(a, q) / (1.f + std::exp(-at(b, q)));
      else if (k == "add_scaled") v = at(a, q) + 0.22f * at(b, q);
      else if (k == "scale_softcap") v = 30.f * std::tanh(at(a, q) * 0.5f / 30.f);
      else v = at(a, q) * (1.f + 0.1f * std::log1p(std::floor(float(index[r]) / 8192.f)));  // query_temperature
      store_from_f32(y.data, y.dtype, q, v);
    }
}

struct ElementwiseShape {
  DType a, b, y;  // b: the second operand (gate, addend); none where the kernel has one input
};

ElementwiseShape elementwise_dtypes(const std::string& k) {
  if (k == "mul" || k == "sigmoid_gate") return {DType::bf16, DType::bf16, DType::bf16};
  if (k == "add_scaled") return {DType::f32, DType::f32, DType::f32};
  if (k == "scale_softcap") return {DType::f32, DType::f32, DType::bf16};  // the stream rounded for a projection
  if (k == "query_temperature") return {DType::bf16, DType::bf16, DType::bf16};  // q in place
  if (k == "transpose" || k == "row_copy") return {DType::f32, DType::f32, DType::f32};
  throw ArgumentError("kernel: " + k + " is not an element-wise case");
}

LinearRow elementwise_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const std::string& k = c.kernel;
    const int64_t rows = c["rows"], cols = c["cols"];
    const ElementwiseShape d = elementwise_dtypes(k);
    // row_copy gathers its rows from a pool twice their number (a step's sequences' state slots, scattered).
    const int64_t a_rows = k == "row_copy" ? 2 * rows : rows;
    const DeviceBuffer a = noise_buffer(device, size_t(a_rows * cols) * dtype_size(d.a), 92, stream);
    const DeviceBuffer b = noise_buffer(device, size_t(rows * cols) * dtype_size(d.b), 93, stream);
    const DeviceBuffer y(device, size_t(rows * cols) * dtype_size(d.y));
    std::vector<int32_t> index(static_cast<size_t>(rows));  // row_copy's sources; query_temperature's positions
    std::iota(index.begin(), index.end(), 0);
    if (k == "row_copy") {
      std::vector<int32_t> pool(static_cast<size_t>(a_rows));
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), std::mt19937(94));
      std::copy_n(pool.begin(), rows, index.begin());
    } else {
      for (int32_t& p : index) p *= 7;  // positions past llama 4's 8192-token interval
    }
    const DeviceBuffer index_buffer(device, index.size() * 4);
    index_buffer.upload(index.data(), index.size() * 4, stream);
    const TensorView av = view_on(a, d.a, {a_rows, cols}), bv = view_on(b, d.b, {rows, cols});
    const TensorView yv = k == "transpose" ? view_on(y, d.y, {cols, rows}) : view_on(y, d.y, {rows, cols});
    const TensorView q = view_on(a, d.a, {rows, cols});
    if (!device.is_cuda())
      return timer([&] { host_elementwise(c, av, bv, k == "query_temperature" ? q : yv, index.data()); });
#if ATTNZOO_WITH_CUDA
    const TensorView positions = view_on(index_buffer, DType::i32, {rows});
    std::function<void()> launch;
    if (k == "mul") {
      check_add_cuda(av, bv, yv);
      launch = [&] { mul_cuda(av, bv, yv, stream); };
    } else if (k == "sigmoid_gate") {
      check_add_cuda(av, bv, yv);
      launch = [&] { sigmoid_gate_cuda(av, bv, yv, stream); };
    } else if (k == "add_scaled") {
      check_add_scaled_cuda(av, bv, 0.22f, yv);
      launch = [&] { add_scaled_cuda(av, bv, 0.22f, yv, stream); };
    } else if (k == "scale_softcap") {
      check_scale_softcap_cuda(av, yv, 0.5f, 30.f);
      launch = [&] { scale_softcap_cuda(av, yv, 0.5f, 30.f, stream); };
    } else if (k == "query_temperature") {
      check_query_temperature_cuda(q, positions, 0.1f, 8192);
      launch = [&] { query_temperature_cuda(q, positions, 0.1f, 8192, stream); };
    } else if (k == "transpose") {
      const Transpose t{av, yv};
      check_transpose_cuda(t);
      launch = [&, t] { transpose_cuda(t, stream); };
    } else {
      RowCopy copy;
      copy.src = av, copy.dst = yv, copy.src_rows = index_buffer.as<const int32_t>(), copy.rows = rows;
      check_copy_rows_cuda(copy);
      launch = [&, copy] { copy_rows_cuda(copy, stream); };
    }
    return timer(launch);
#else
    throw DeviceError(k + ": this build has no CUDA");
#endif
  });
}

}  // namespace

std::vector<LinearCase> dequant_cases(Scale s) {
  std::vector<LinearCase> out;
  // Llama-3-8B's down projection, [4096, 14336]: 117 MiB of bf16 panel, past the L2; the tiny rows one block wide.
  const int64_t rows = s == Scale::tiny ? 3 : 4096, cols = s == Scale::tiny ? 256 : 14336;
  for (QuantType t : kDequantFormats)
    out.push_back({std::string("dequant_") + quant_type_name(t),
                   {{"rows", rows}, {"cols", cols}, {"row_bytes", *quant_row_bytes(t, cols)}}});
  return out;
}

std::vector<LinearCase> delta_gates_cases(Scale s) {
  const int64_t T = s == Scale::tiny ? 9 : 4096;
  // Qwen3-Next's 32 value heads; Kimi Linear's 32 heads x 128 key channels (a decay each, A per head).
  return {{"delta_gates_gdn", {{"T", T}, {"Nb", 32}, {"Ng", 32}, {"group", 1}}},
          {"delta_gates_kda", {{"T", T}, {"Nb", 32}, {"Ng", 32 * 128}, {"group", 128}}}};
}

std::vector<LinearCase> elementwise_cases(Scale s) {
  const int64_t T = s == Scale::tiny ? 7 : 4096, W = s == Scale::tiny ? 96 : 4096;
  // A 4096-token step of a 4096-wide model; the transpose over Mamba's 8192 inner channels; row_copy gathers 64
  // Gated DeltaNet states (32 heads x 128 x 128 f32, 2 MiB each) from a pool of 128.
  return {{"mul", {{"rows", T}, {"cols", W}}},
          {"sigmoid_gate", {{"rows", T}, {"cols", W}}},
          {"add_scaled", {{"rows", T}, {"cols", W}}},
          {"scale_softcap", {{"rows", T}, {"cols", W}}},
          {"query_temperature", {{"rows", T}, {"cols", W}}},
          {"transpose", {{"rows", T}, {"cols", 2 * W}}},
          {"row_copy", {{"rows", s == Scale::tiny ? 3 : 64}, {"cols", s == Scale::tiny ? 64 : 32 * 128 * 128}}}};
}

double dequant_bytes(const LinearCase& c) {
  return double(c["rows"]) * (double(c["row_bytes"]) + 2.0 * double(c["cols"]));
}

double delta_gates_bytes(const LinearCase& c) { return double(c["T"]) * double(c["Nb"] + c["Ng"]) * 4 * 2; }

double elementwise_bytes(const LinearCase& c) {
  const ElementwiseShape d = elementwise_dtypes(c.kernel);
  const double n = double(c["rows"]) * double(c["cols"]);
  const std::string& k = c.kernel;
  if (k == "mul" || k == "sigmoid_gate" || k == "add_scaled")
    return n * double(dtype_size(d.a) + dtype_size(d.b) + dtype_size(d.y));
  if (k == "query_temperature") return n * 2.0 * double(dtype_size(d.a)) + 4.0 * double(c["rows"]);
  return n * double(dtype_size(d.a) + dtype_size(d.y));  // scale_softcap, transpose, row_copy
}

const std::vector<BandwidthTable>& layer_tables() {
  static const std::vector<BandwidthTable> tables = {
      {"dequant", "GGUF blocks to bf16 (quant_dequant_cuda)", dequant_cases, dequant_row, dequant_bytes},
      {"delta_gates", "delta gates (g, beta from a, b; f32)", delta_gates_cases, delta_gates_row,
       delta_gates_bytes},
      {"elementwise", "element-wise and copies (a step's small kernels)", elementwise_cases, elementwise_row,
       elementwise_bytes}};
  return tables;
}

}  // namespace attnzoo::bench
