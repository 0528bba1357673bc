#include "bench/cuda_sampling_bench.h"

#include <cstdint>
#include <vector>

#include "bench/device_fill.h"
#include "engine/sample_rows.h"

namespace attnzoo::bench {

std::vector<LinearCase> sampling_cases(Scale s) {
  std::vector<LinearCase> out;
  const int64_t vocab = s == Scale::tiny ? 1000 : 151936;
  for (int64_t batch : {int64_t(1), s == Scale::tiny ? int64_t(3) : int64_t(64)})
    for (int64_t mode : {0, 1, 2}) out.push_back({"sample", {{"B", batch}, {"V", vocab}, {"mode", mode}}});
  return out;
}

double sampling_bytes(const LinearCase& c) { return 4.0 * double(c["B"]) * double(c["V"]); }

namespace {

SamplingParams mode_params(int64_t mode) {
  SamplingParams p;
  if (mode == 0) p.temperature = 0.f;
  if (mode == 2) p.top_k = 50, p.top_p = 0.9f;
  return p;
}

LinearRow sampling_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t B = c["B"], V = c["V"];
    // Logits spread like a model's (a few units), each row its own.
    std::vector<float> host(size_t(B * V));
    uint64_t state = 21;
    for (float& x : host) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = float(int64_t(state >> 40) - (int64_t(1) << 23)) * 0x1p-21f;
    }
    const DeviceBuffer logits(device, host.size() * sizeof(float));
    logits.upload(host.data(), host.size() * sizeof(float), stream);
    const TensorView view = view_on(logits, DType::f32, {B, V});
    std::vector<Sampler> samplers;
    samplers.reserve(size_t(B));
    std::vector<Sampler*> rows;
    for (int64_t b = 0; b < B; ++b) rows.push_back(&samplers.emplace_back(mode_params(c["mode"])));
    const std::vector<std::span<const int32_t>> contexts(static_cast<size_t>(B));
    std::vector<int32_t> ids(static_cast<size_t>(B));
    return timer([&] { sample_rows(view, rows, contexts, ids); });
  });
}

}  // namespace

std::vector<LinearRow> run_sampling_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(sampling_cases(s), sampling_row, device, stream, timer);
}

std::string format_sampling_text(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_text(
      "sampling (f32 logits, mode 0 greedy / 1 temperature / 2 top-k 50 + top-p 0.9)   median ms   GB/s of logits read   of copy\n",
      rows, sampling_bytes, copy_gbps);
}

std::string format_sampling_json(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_json(rows, sampling_bytes, "bytes", copy_gbps);
}

}  // namespace attnzoo::bench
