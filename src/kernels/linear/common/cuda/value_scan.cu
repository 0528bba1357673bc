// The device value scans: each tensor is scanned by one grid-stride kernel that keeps the smallest offending
// flat index, so the error names the same element, with the same words, as the host scan would.
#include "kernels/linear/common/cuda/value_scan.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/value_scan_kernel.cuh"

namespace attnzoo {
namespace cuda_linear {

// The kernel around first_bad_value (value_scan_kernel.cuh).
__global__ void first_bad_value_kernel(const void* x, Elem t, int64_t n, bool log_decay, unsigned long long* first) {
  first_bad_value(x, t, n, log_decay, first);
}

}  // namespace cuda_linear

void require_finite_on_device(const std::vector<DeviceValueScan>& scans, Stream stream) {
  using namespace cuda_linear;
  if (scans.empty()) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const size_t bytes = scans.size() * sizeof(unsigned long long);
  StreamScratch scratch(bytes, cuda_stream);
  auto* first = reinterpret_cast<unsigned long long*>(scratch.data());
  cuda_check(cudaMemsetAsync(first, 0xff, bytes, cuda_stream), "cudaMemsetAsync");  // kNone everywhere
  for (size_t i = 0; i < scans.size(); ++i) {
    const DeviceValueScan& s = scans[i];
    if (s.n == 0) continue;
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>((s.n + kThreads - 1) / kThreads, 1024);  // then grid-stride
    first_bad_value_kernel<<<unsigned(blocks), kThreads, 0, cuda_stream>>>(s.data, elem_of(s.dtype), s.n,
                                                                           s.log_decay, first + i);
    cuda_check(cudaGetLastError(), "first_bad_value_kernel launch");
  }
  std::vector<unsigned long long> found(scans.size());
  cuda_check(cudaMemcpyAsync(found.data(), first, bytes, cudaMemcpyDeviceToHost, cuda_stream), "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(cuda_stream), "cudaStreamSynchronize");
  scratch.finish();

  for (size_t i = 0; i < scans.size(); ++i) {
    if (found[i] == kNone) continue;
    const DeviceValueScan& s = scans[i];
    const int64_t at = int64_t(found[i]);
    // The offending element itself, for the message (the error path only).
    unsigned char raw[4] = {};
    const size_t size = dtype_size(s.dtype);
    cuda_check(cudaMemcpy(raw, static_cast<const unsigned char*>(s.data) + at * int64_t(size), size,
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    const float v = load_as_f32(raw, s.dtype, 0);
    require(v - v == 0.f, s.name, "contains NaN or Inf (flat index " + std::to_string(at) + ")");
    require(false, s.name, "log decays must be <= 0, found " + std::to_string(v) + " at flat index " +
                               std::to_string(at));
  }
}

}  // namespace attnzoo
