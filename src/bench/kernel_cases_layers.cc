// The dequant, delta-gate and element-wise cases of kernel_cases_layers.h (the MoE ones: kernel_cases_moe.cc).
#include "bench/kernel_cases_layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench/case_io.h"
#include "bench/kernel_cases_step.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/quant.h"
#include "layers/cuda/delta_gates_cuda.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/cuda/transpose_cuda.h"
#include "layers/sequence_schedule.h"

namespace attnzoo::bench {
namespace {

namespace fs = std::filesystem;

std::string head(const std::string& name, const char* kind) {
  return "{\"name\": " + json_string(name) + ", \"kind\": " + json_string(kind);
}

HostArray scaled(DType t, std::vector<int64_t> shape, uint32_t seed, float scale) {
  HostArray a = random_array(t, std::move(shape), seed);
  for (int64_t i = 0; i < a.numel(); ++i)
    store_from_f32(a.bytes.data(), t, i, scale * load_as_f32(a.bytes.data(), t, i));
  return a;
}

float at(const HostArray& a, int64_t i) { return load_as_f32(a.bytes.data(), a.dtype, i); }

// Columns [c0, c0 + n) of a's rows, contiguous: what a strided view of a wider row holds.
HostArray columns(const HostArray& a, int64_t c0, int64_t n) {
  const int64_t rows = a.shape[0], width = a.shape[1];
  const size_t e = dtype_size(a.dtype);
  HostArray out = make_array(a.dtype, {rows, n});
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.bytes.data() + size_t(r * n) * e, a.bytes.data() + size_t(r * width + c0) * e, size_t(n) * e);
  return out;
}

// A view of columns [c0, c0 + n) of a placed [rows, width] array (its row stride the width); only the CUDA
// build's cases take column slices.
[[maybe_unused]] TensorView column_view(const Placed& p, int64_t c0, int64_t n) {
  TensorView v = p.view;
  v.data = static_cast<uint8_t*>(v.data) + size_t(c0) * dtype_size(v.dtype);
  v.shape[1] = n;
  return v;
}

// --- GGUF blocks to bf16: out [rows, cols] = bf16(dequant_reference(w)) -----------------------------------------
std::string run_dequant(QuantType t, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = std::string("dequant_") + quant_type_name(t);
  const int64_t rows = 24, cols = 512;  // two super-blocks a row
  const std::vector<uint8_t> bytes = quantized_rows(t, rows, cols, seed);
  const HostArray w = bytes_array(bytes, rows);
  HostArray out = make_array(DType::bf16, {rows, cols});
  write_npy(dir / (stem + "_w.npy"), w);
  const std::string entry = head(stem, "dequant") + ", \"format\": " + json_string(quant_type_name(t)) +
                            ", \"rows\": " + std::to_string(rows) + ", \"cols\": " + std::to_string(cols);
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      std::vector<float> row(static_cast<size_t>(cols));
      const int64_t row_bytes = w.shape[1];
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row_reference(t, bytes.data() + r * row_bytes, row.data(), cols);
        for (int64_t i = 0; i < cols; ++i) store_from_f32(out.bytes.data(), DType::bf16, r * cols + i, row[size_t(i)]);
      }
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dw = place(w, device), dout = place(out, device);
      QuantMatrix m;
      m.data = dw.buffer.data(), m.type = t, m.rows = rows, m.cols = cols, m.row_bytes = w.shape[1];
      quant_dequant_cuda(make_quant_dequant_cuda_problem(m, device, dout.view), current_stream());
      out = fetch(dout, out);
#else
      throw DeviceError("dequant: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_out.npy"), out);
  });
}

// --- delta gates: g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b) -------------------------------------
struct GateSpec {
  const char* name;
  const char* family;  // "gated_deltanet" (a decay per value head) or "kda" (per head and key channel)
  int64_t T, Nb, Ng, group;
};

std::string run_delta_gates(const GateSpec& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const int64_t T = c.T, Nb = c.Nb, Ng = c.Ng, width = Nb + Ng + 5;
  // b | a | 5 more columns: one projection row, as the mixers slice it. a spans softplus' threshold of 20 both
  // ways; b spans sigmoid's tails.
  HostArray proj = random_array(DType::f32, {T, width}, seed);
  for (int64_t i = 0; i < proj.numel(); ++i)
    store_from_f32(proj.bytes.data(), DType::f32, i, (i % width < Nb ? 4.f : 12.f) * at(proj, i));
  const HostArray A_log = scaled(DType::f32, {Ng / c.group}, seed + 1, 0.5f);
  const HostArray dt_bias = random_array(DType::f32, {Ng}, seed + 2);
  HostArray neg_A = make_array(DType::f32, {Ng / c.group});
  for (int64_t h = 0; h < neg_A.numel(); ++h)
    store_from_f32(neg_A.bytes.data(), DType::f32, h, -std::exp(at(A_log, h)));
  HostArray g = make_array(DType::f32, {T, Ng}), beta = make_array(DType::f32, {T, Nb});
  const std::string stem = c.name;
  write_npy(dir / (stem + "_b.npy"), columns(proj, 0, Nb));
  write_npy(dir / (stem + "_a.npy"), columns(proj, Nb, Ng));
  write_npy(dir / (stem + "_A_log.npy"), A_log);
  write_npy(dir / (stem + "_dt_bias.npy"), dt_bias);
  const std::string entry = head(stem, "delta_gates") + ", \"family\": " + json_string(c.family) +
                            ", \"T\": " + std::to_string(T) + ", \"K\": " + std::to_string(c.group);
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {  // the mixers' loops (gated_deltanet_mixer.cc, kda_mixer.cc)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < Ng; ++j)
          store_from_f32(g.bytes.data(), DType::f32, t * Ng + j,
                         at(neg_A, j / c.group) * softplus(at(proj, t * width + Nb + j) + at(dt_bias, j)));
        for (int64_t h = 0; h < Nb; ++h)
          store_from_f32(beta.bytes.data(), DType::f32, t * Nb + h, 1.f / (1.f + std::exp(-at(proj, t * width + h))));
      }
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dp = place(proj, device), dA = place(neg_A, device), db = place(dt_bias, device),
                   dg = place(g, device), dbeta = place(beta, device);
      delta_gates_cuda({column_view(dp, 0, Nb), column_view(dp, Nb, Ng), dA.view, db.view, dg.view, dbeta.view});
      g = fetch(dg, g);
      beta = fetch(dbeta, beta);
#else
      throw DeviceError("delta gates: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_g.npy"), g);
    write_npy(dir / (stem + "_beta.npy"), beta);
  });
}

// --- the element-wise kernels, the transpose and the row copy -------------------------------------------------
std::string run_elementwise(const std::string& op, const fs::path& dir, Device device, uint32_t seed,
                            bool& refused) {
  const std::string stem = "elementwise_" + op;
  auto save = [&](const char* what, const HostArray& a) { write_npy(dir / (stem + "_" + what + ".npy"), a); };
  std::string params;
  const bool f32 = op == "add_scaled" || op == "scale_softcap" || op == "transpose" || op == "row_copy";
  const DType in = f32 ? DType::f32 : DType::bf16, out_dtype = op == "scale_softcap" ? DType::bf16 : in;
  const int64_t T = 13, W = 200;
  HostArray a = random_array(in, {T, W}, seed), b = random_array(in, {T, W}, seed + 1);
  // sigmoid_gate: the gate the second half of a [q | gate] row, as Qwen3-Next's q_proj rows hold it.
  const HostArray wide = random_array(DType::bf16, {T, 2 * W}, seed + 2);
  HostArray positions = make_array(DType::i32, {T});
  const int32_t pos[T] = {0, 1, 8191, 8192, 8193, 16383, 16384, 40000, 100000, 7, 300000, 65536, 12345};
  std::memcpy(positions.bytes.data(), pos, sizeof pos);
  const HostArray pool = random_array(DType::f32, {10, 70}, seed + 3);
  const HostArray dst_before = random_array(DType::f32, {8, 70}, seed + 4);
  HostArray src_rows = make_array(DType::i32, {5}), dst_rows = make_array(DType::i32, {5});
  const int32_t src_index[5] = {9, 0, 4, 4, 7}, dst_index[5] = {3, 7, 0, 5, 1};  // a source read twice
  std::memcpy(src_rows.bytes.data(), src_index, sizeof src_index);
  std::memcpy(dst_rows.bytes.data(), dst_index, sizeof dst_index);
  const float alpha = 0.22f, scale = 0.5f, cap = 10.f, beta = 0.1f;
  const int64_t interval = 8192;
  if (op == "scale_softcap") a = scaled(DType::f32, {T, W}, seed, 40.f);  // past the cap both ways
  if (op == "transpose") a = random_array(DType::f32, {37, 150}, seed);
  HostArray out = op == "transpose" ? make_array(DType::f32, {150, 37}) : op == "row_copy" ? dst_before
                                                                        : make_array(out_dtype, {T, W});
  if (op == "mul" || op == "add_scaled") save("a", a), save("b", b);
  if (op == "sigmoid_gate") save("a", a), save("gate", columns(wide, W, W));
  if (op == "scale_softcap") save("x", a);
  if (op == "query_temperature") save("q", a), save("positions", positions);
  if (op == "transpose") save("src", a);
  if (op == "row_copy")
    save("src", pool), save("dst_before", dst_before), save("src_rows", src_rows), save("dst_rows", dst_rows);
  if (op == "add_scaled") params = ", \"alpha\": " + number(alpha);
  if (op == "scale_softcap") params = ", \"scale\": " + number(scale) + ", \"cap\": " + number(cap);
  if (op == "query_temperature") params = ", \"beta\": " + number(beta) + ", \"interval\": " + std::to_string(interval);
  const std::string entry = head(stem, "elementwise") + ", \"op\": " + json_string(op) + ", \"dtype\": " +
                            json_string(dtype_name(in)) + ", \"out_dtype\": " + json_string(dtype_name(out_dtype)) +
                            params;
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {  // the CPU forwards' loops, f32 math
      const int64_t n = out.numel();
      for (int64_t i = 0; i < n && op != "row_copy"; ++i) {
        const int64_t r = i / W, col = i % W;
        float v = 0;
        if (op == "mul") v = at(a, i) * at(b, i);
        if (op == "sigmoid_gate") v = at(a, i) / (1.f + std::exp(-at(wide, r * 2 * W + W + col)));
        if (op == "add_scaled") v = at(a, i) + alpha * at(b, i);
        if (op == "scale_softcap") v = cap * std::tanh(at(a, i) * scale / cap);
        if (op == "query_temperature")
          v = at(a, i) * (1.f + beta * std::log(1.f + std::floor(float(pos[r]) / float(interval))));
        if (op == "transpose") v = at(a, (i % 37) * 150 + i / 37);
        store_from_f32(out.bytes.data(), out.dtype, i, v);
      }
      if (op == "row_copy")
        for (int r = 0; r < 5; ++r)
          std::memcpy(out.bytes.data() + size_t(dst_index[r]) * 70 * 4,
                      pool.bytes.data() + size_t(src_index[r]) * 70 * 4, 70 * 4);
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed da = place(a, device), db = place(b, device), dwide = place(wide, device),
                   dpos = place(positions, device), dpool = place(pool, device), dsrc = place(src_rows, device),
                   ddst = place(dst_rows, device), dout = place(out, device);
      if (op == "mul") mul_cuda(da.view, db.view, dout.view);
      if (op == "sigmoid_gate") sigmoid_gate_cuda(da.view, column_view(dwide, W, W), dout.view);
      if (op == "add_scaled") add_scaled_cuda(da.view, db.view, alpha, dout.view);
      if (op == "scale_softcap") scale_softcap_cuda(da.view, dout.view, scale, cap);
      if (op == "query_temperature") query_temperature_cuda(da.view, dpos.view, beta, interval);  // in place
      if (op == "transpose") transpose_cuda({da.view, dout.view});
      if (op == "row_copy") {
        RowCopy copy;
        copy.src = dpool.view, copy.dst = dout.view, copy.rows = 5;
        copy.src_rows = static_cast<const int32_t*>(dsrc.buffer.data());
        copy.dst_rows = static_cast<const int32_t*>(ddst.buffer.data());
        copy_rows_cuda(copy);
      }
      out = op == "query_temperature" ? fetch(da, a) : fetch(dout, out);
#else
      throw DeviceError(op + ": this build has no CUDA");
#endif
    }
    save("out", out);
  });
}

}  // namespace

void write_layer_cases(const fs::path& dir, Device device, uint32_t& seed,
                       const std::function<void(const std::string& entry, bool refused)>& add) {
  bool refused = false;
  auto run = [&](const std::string& entry) { add(entry, refused); };
  for (QuantType t :
       {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K})
    run(run_dequant(t, dir, device, seed += 10, refused));
  // Gated DeltaNet: 12 value heads; KDA: 4 heads x 64 key channels, A per head.
  const GateSpec gates[] = {{"delta_gates_gdn", "gated_deltanet", 37, 12, 12, 1},
                            {"delta_gates_kda", "kda", 23, 4, 256, 64}};
  for (const GateSpec& g : gates) run(run_delta_gates(g, dir, device, seed += 10, refused));
  for (const char* op :
       {"mul", "sigmoid_gate", "add_scaled", "scale_softcap", "query_temperature", "transpose", "row_copy"})
    run(run_elementwise(op, dir, device, seed += 10, refused));
}

}  // namespace attnzoo::bench
