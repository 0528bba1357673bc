#include "bench/cuda_gemm_bench.h"

#include <algorithm>
#include <cstdint>

#include "bench/device_fill.h"
#include "layers/cuda/gemm_cuda.h"

namespace attnzoo::bench {

std::vector<LinearCase> gemm_cases(Scale s) {
  struct Shape {
    int64_t M, N, K;
  };
  const std::vector<Shape> shapes = s == Scale::tiny
                                        ? std::vector<Shape>{{64, 96, 128}}
                                        : std::vector<Shape>{{4096, 4096, 4096}, {4096, 14336, 4096},
                                                             {4096, 4096, 14336}, {512, 4096, 4096}};
  std::vector<LinearCase> out;
  for (const Shape& sh : shapes)
    for (const char* kernel : {"gemm_ours", "gemm_cublaslt"})
      out.push_back({kernel, {{"M", sh.M}, {"N", sh.N}, {"K", sh.K}}});
  return out;
}

double gemm_flops(const LinearCase& c) { return 2.0 * double(c["M"]) * double(c["N"]) * double(c["K"]); }

namespace {

LinearRow gemm_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t M = c["M"], N = c["N"], K = c["K"];
    const DeviceBuffer x = noise_buffer(device, size_t(M * K) * 2, 31, stream);
    const DeviceBuffer w = noise_buffer(device, size_t(N * K) * 2, 32, stream);
    const DeviceBuffer y(device, size_t(M * N) * 2);
    const TensorView xv = view_on(x, DType::bf16, {M, K}), wv = view_on(w, DType::bf16, {N, K}),
                     yv = view_on(y, DType::bf16, {M, N});
    GemmOptions opts;
    opts.backend = c.kernel == "gemm_ours" ? GemmBackend::ours : GemmBackend::cublaslt;
    return timer([&] { gemm_cuda(xv, wv, nullptr, yv, opts, stream); });
  });
}

}  // namespace

std::vector<LinearRow> run_gemm_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(gemm_cases(s), gemm_row, device, stream, timer);
}

double best_gemm_tflops(const std::vector<LinearRow>& rows) {
  double best = 0;
  for (const LinearRow& r : rows)
    if (r.available()) best = std::max(best, gemm_flops(r.shape) / r.median_s * 1e-12);
  return best;
}

std::string format_gemm_text(const std::vector<LinearRow>& rows) {
  return format_flops_text("projection GEMM (y = x W^T, bf16 in and out, f32 accumulation)  median ms   TFLOP/s\n",
                           rows, gemm_flops);
}

std::string format_gemm_json(const std::vector<LinearRow>& rows) { return format_flops_json(rows, gemm_flops); }

}  // namespace attnzoo::bench
