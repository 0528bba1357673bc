#include "bench/cuda_gemv_bench.h"

#include <cstdint>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "core/error.h"
#include "kernels/quant/gemv_tensors.h"
#include "kernels/quant/quant.h"

namespace attnzoo::bench {
namespace {

const QuantType kFormats[] = {QuantType::BF16, QuantType::F16,  QuantType::Q8_0, QuantType::Q4_0,
                              QuantType::Q4_1, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K};

QuantType format_of(const LinearCase& c) {
  for (QuantType t : kFormats)
    if (c.kernel == std::string("gemv_") + quant_type_name(t)) return t;
  throw ArgumentError("kernel: " + c.kernel + " is not a quantized GEMV case");
}

LinearRow gemv_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const QuantType t = format_of(c);
    const int64_t M = c["M"], N = c["N"], K = c["K"];
    // Random bytes: timing reads every byte the same whatever the values (NaN scales included).
    const DeviceBuffer w = noise_buffer(device, size_t(N * c["row_bytes"]), 21, stream);
    const DeviceBuffer x = noise_buffer(device, size_t(M * K) * 4, 22, stream);
    const DeviceBuffer y(device, size_t(M * N) * 4);
    QuantMatrix wm;
    wm.data = w.data();
    wm.type = t;
    wm.rows = N, wm.cols = K;
    wm.row_bytes = c["row_bytes"];
    const TensorView xv = view_on(x, DType::f32, {M, K}), yv = view_on(y, DType::f32, {M, N});
    return timer([&] { quant_gemv_tensors(wm, device, xv, yv); });
  });
}

}  // namespace

std::vector<LinearCase> quant_gemv_cases(Scale s) {
  std::vector<LinearCase> out;
  for (QuantType t : kFormats) {
    const std::string kernel = std::string("gemv_") + quant_type_name(t);
    auto add = [&](int64_t M, int64_t N, int64_t K) {
      out.push_back({kernel, {{"M", M}, {"N", N}, {"K", K}, {"row_bytes", *quant_row_bytes(t, K)}}});
    };
    if (s == Scale::tiny) {
      add(1, 40, 512);
      add(3, 40, 2304);
      continue;
    }
    for (int64_t K : {int64_t(4096), int64_t(14336)})
      for (int64_t M : {int64_t(1), int64_t(8)}) add(M, 4096, K);
  }
  return out;
}

double quant_gemv_bytes(const LinearCase& c) { return double(c["N"]) * double(c["row_bytes"]); }

std::vector<LinearRow> run_quant_gemv_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(quant_gemv_cases(s), gemv_row, device, stream, timer);
}

std::string format_quant_gemv_text(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_text(
      "quantized GEMV (y = x w^T, f32 x, GGUF w)                  median ms   GB/s of weight read   of copy\n", rows,
      quant_gemv_bytes, copy_gbps);
}

std::string format_quant_gemv_json(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_json(rows, quant_gemv_bytes, "bytes", copy_gbps);
}

}  // namespace attnzoo::bench
