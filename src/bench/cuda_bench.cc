#include "bench/cuda_bench.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/softmax/attention.h"

namespace attnzoo::bench {
namespace {

// bf16 noise from a 64-bit LCG: random enough for softmax timing, and a 134 MB query tensor fills in well
// under a second.
std::vector<uint16_t> noise_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const float f = float(int32_t(x >> 40) - (1 << 23)) / float(1 << 23);  // [-1, 1)
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    out[i] = uint16_t(bits >> 16);
  }
  return out;
}

TensorView device_view(const DeviceBuffer& b, std::initializer_list<int64_t> shape) {
  TensorView t = TensorView::contiguous(b.data(), DType::bf16, shape);
  t.device = b.device();
  return t;
}

}  // namespace

std::vector<CudaPrefillCase> cuda_prefill_cases(Scale s) {
  if (s == Scale::tiny) return {{1, 256, 4, 2, 128, true}};
  if (s == Scale::quick) return {{1, 2048, 32, 8, 128, true}, {1, 2048, 32, 8, 64, true}};
  // The headline shapes (GQA 32 / 8, D = 128, causal at 4k x 4 and 16k x 1), then the other head dims and the
  // non-causal form.
  return {{4, 4096, 32, 8, 128, true},  {1, 16384, 32, 8, 128, true}, {4, 4096, 32, 8, 64, true},
          {4, 4096, 32, 8, 256, true}, {4, 4096, 32, 8, 128, false}};
}

double prefill_flops(const CudaPrefillCase& c) {
  const double pairs = c.causal ? double(c.T) * double(c.T + 1) / 2 : double(c.T) * double(c.T);
  return 4.0 * double(c.B) * double(c.Hq) * double(c.D) * pairs;
}

CudaKernelReport run_cuda_kernel_report(Scale s, Device device) {
  require(device.is_cuda(), "--device", "the CUDA table needs a CUDA device");
  const CudaDeviceInfo info = cuda_device_info(device.index);
  CudaKernelReport r;
  char name[256];
  std::snprintf(name, sizeof name, "%s %s, sm_%d%d, %d SMs, %.1f GiB", device.str().c_str(), info.name.c_str(),
                info.sm_major, info.sm_minor, info.multiprocessors, double(info.memory_bytes) / double(1ull << 30));
  r.device = name;
  const Stream stream = current_stream();
  const int reps = s == Scale::full ? 20 : 5;

  {  // Copy bandwidth: 1 GiB (64 MiB at the smaller scales) device to device, read + written.
    const size_t bytes = s == Scale::full ? (size_t(1) << 30) : (size_t(64) << 20);
    DeviceBuffer a(device, bytes), b(device, bytes);
    const Timing t = summarize(time_on_stream([&] { copy_bytes(b.data(), device, a.data(), device, bytes, stream); },
                                              stream, 2, reps));
    r.copy_gbps = 2.0 * double(bytes) / t.median_s * 1e-9;
  }

  for (const CudaPrefillCase& c : cuda_prefill_cases(s)) {
    const size_t nq = size_t(c.B * c.T * c.Hq * c.D), nkv = size_t(c.B * c.T * c.Hkv * c.D);
    DeviceBuffer q(device, nq * 2), k(device, nkv * 2), v(device, nkv * 2), o(device, nq * 2);
    q.upload(noise_bf16(nq, 1).data(), nq * 2, stream);
    k.upload(noise_bf16(nkv, 2).data(), nkv * 2, stream);
    v.upload(noise_bf16(nkv, 3).data(), nkv * 2, stream);
    const TensorView qv = device_view(q, {c.B, c.T, c.Hq, c.D}), kv = device_view(k, {c.B, c.T, c.Hkv, c.D});
    const TensorView vv = device_view(v, {c.B, c.T, c.Hkv, c.D}), ov = device_view(o, {c.B, c.T, c.Hq, c.D});
    AttentionOptions opts;
    opts.causal = c.causal;
    const Timing t = summarize(time_on_stream([&] { attention_prefill(qv, kv, vv, ov, opts); }, stream, 2, reps));
    r.prefill.push_back({c, t.median_s, t.min_s, prefill_flops(c) / t.median_s * 1e-12});
  }
  return r;
}

std::string format_cuda_text(const CudaKernelReport& r) {
  std::string s = "device       " + r.device + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "copy         %.0f GB/s (device to device, read + write)\n", r.copy_gbps);
  s += line;
  s += "prefill (bf16, GQA, FlashAttention FLOP count)   median ms   TFLOP/s\n";
  for (const CudaPrefillRow& row : r.prefill) {
    const CudaPrefillCase& c = row.shape;
    std::snprintf(line, sizeof line, "  B=%-2lld T=%-6lld Hq=%lld Hkv=%lld D=%-3lld %-10s %10.3f %9.1f\n",
                  (long long)c.B, (long long)c.T, (long long)c.Hq, (long long)c.Hkv, (long long)c.D,
                  c.causal ? "causal" : "non-causal", row.median_s * 1e3, row.tflops);
    s += line;
  }
  return s;
}

std::string format_cuda_json(const CudaKernelReport& r) {
  std::string s = "{\"device\": \"" + r.device + "\", \"copy_gbps\": " + std::to_string(r.copy_gbps) + ", \"prefill\": [";
  for (size_t i = 0; i < r.prefill.size(); ++i) {
    const CudaPrefillRow& row = r.prefill[i];
    const CudaPrefillCase& c = row.shape;
    char item[320];
    std::snprintf(item, sizeof item,
                  "%s{\"B\": %lld, \"T\": %lld, \"Hq\": %lld, \"Hkv\": %lld, \"D\": %lld, \"causal\": %s, "
                  "\"median_s\": %.9g, \"min_s\": %.9g, \"tflops\": %.6g}",
                  i ? ", " : "", (long long)c.B, (long long)c.T, (long long)c.Hq, (long long)c.Hkv, (long long)c.D,
                  c.causal ? "true" : "false", row.median_s, row.min_s, row.tflops);
    s += item;
  }
  return s + "]}\n";
}

}  // namespace attnzoo::bench
