#pragma once
// `attnzoo bench kernels --device cuda`: our CUDA kernels timed by CUDA events through the same public entry
// the CPU table uses (attention_prefill, branching on the tensors' device), at the shapes the GPU peers were
// measured at, beside the device's measured copy bandwidth. PyTorch's SDPA backends and the cuBLAS GEMM peak
// join in scripts/gpu_peers.py, which reads this JSON in the same GPU run.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "core/device.h"

namespace attnzoo::bench {

struct CudaPrefillCase {
  int64_t B, T, Hq, Hkv, D;
  bool causal;
};
struct CudaPrefillRow {
  CudaPrefillCase shape;
  double median_s = 0, min_s = 0;
  double tflops = 0;  // visible score / value products only (a causal problem counts half), as FlashAttention does
};
struct CudaKernelReport {
  std::string device;  // "cuda:0 NVIDIA H200, sm_90, 132 SMs, 139.8 GiB"
  double copy_gbps = 0;  // device-to-device copy, bytes read + written per second
  std::vector<CudaPrefillRow> prefill;
};

std::vector<CudaPrefillCase> cuda_prefill_cases(Scale s);
// FLOPs of the two products of attention over the visible (query, key) pairs: 4 * B * Hq * D * pairs.
double prefill_flops(const CudaPrefillCase& c);
// DeviceError without a GPU (or without CUDA in this build).
CudaKernelReport run_cuda_kernel_report(Scale s, Device device);
std::string format_cuda_text(const CudaKernelReport& r);
std::string format_cuda_json(const CudaKernelReport& r);

}  // namespace attnzoo::bench
