#include "bench/cuda_conv_bench.h"

#include <cstdint>
#include <vector>

#include "bench/device_fill.h"
#include "kernels/linear/short_conv/short_conv.h"

namespace attnzoo::bench {
namespace {

LinearRow conv_prefill_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t B = c["B"], T = c["T"], D = c["D"], W = c["W"];
    const size_t n = size_t(B * T * D);
    const DeviceBuffer x = noise_buffer(device, n * 2, 71, stream), y(device, n * 2);
    const DeviceBuffer weight = noise_buffer(device, size_t(D * W) * 2, 72, stream);
    const DeviceBuffer bias = noise_buffer(device, size_t(D) * 2, 73, stream);
    CausalConv1dOptions opts;
    opts.bias = view_on(bias, DType::bf16, {D});
    opts.activation = ConvActivation::silu;
    const TensorView xv = view_on(x, DType::bf16, {B, T, D}), yv = view_on(y, DType::bf16, {B, T, D});
    const TensorView wv = view_on(weight, DType::bf16, {D, W});
    return timer([&] { causal_conv1d(xv, wv, yv, opts); });
  });
}

}  // namespace

std::vector<LinearCase> conv_prefill_cases(Scale s) {
  if (s == Scale::tiny) return {{"conv1d_prefill", {{"B", 2}, {"T", 33}, {"D", 64}, {"W", 4}}}};
  return {{"conv1d_prefill", {{"B", 4}, {"T", 4096}, {"D", 8192}, {"W", 4}}},
          {"conv1d_prefill", {{"B", 4}, {"T", 4096}, {"D", 5376}, {"W", 4}}}};
}

double conv_prefill_bytes(const LinearCase& c) {
  return 2.0 * double(c["B"]) * double(c["T"]) * double(c["D"]) * 2.0;
}

std::vector<LinearRow> run_conv_prefill_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(conv_prefill_cases(s), conv_prefill_row, device, stream, timer);
}

std::string format_conv_prefill_text(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_text(
      "causal conv1d prefill (bf16, bias + SiLU)                  median ms   GB/s of x read + y written   of copy\n",
      rows, conv_prefill_bytes, copy_gbps);
}

std::string format_conv_prefill_json(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_json(rows, conv_prefill_bytes, "bytes", copy_gbps);
}

}  // namespace attnzoo::bench
