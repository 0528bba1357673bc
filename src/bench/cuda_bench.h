#pragma once
// `attnzoo bench kernels --device cuda`: our CUDA kernels timed by CUDA events through the same public entry
// the CPU table uses (attention_prefill, branching on the tensors' device), at the shapes the GPU peers were
// measured at, beside the device's measured copy bandwidth. PyTorch's SDPA backends and the cuBLAS GEMM peak
// join in scripts/gpu_peers.py, which reads this JSON in the same GPU run.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/cuda_conv_bench.h"
#include "bench/cuda_gemv_bench.h"
#include "bench/cuda_gemm_bench.h"
#include "bench/cuda_layer_bench.h"
#include "bench/cuda_linear_bench.h"
#include "bench/cuda_mla_bench.h"
#include "bench/cuda_moe_bench.h"
#include "bench/cuda_runner_bench.h"
#include "bench/cuda_sampling_bench.h"
#include "bench/cuda_step_bench.h"
#include "bench/kernel_bench.h"
#include "core/device.h"
#include "core/dtype.h"

namespace attnzoo::bench {

struct CudaPrefillCase {
  int64_t B, T, Hq, Hkv, D;
  bool causal;
  // Where the Hopper kernel runs: one row per schedule (static, dynamic) instead of the launcher's choice alone,
  // so one GPU run compares them (issue 25's two causal shapes).
  bool both_schedules = false;
};
struct CudaPrefillRow {
  CudaPrefillCase shape;
  double median_s = 0, min_s = 0;
  double tflops = 0;  // visible score / value products only (a causal problem counts half), as FlashAttention does
  std::string path = "sm80";  // the kernel that ran: "sm90" (wgmma + TMA) or "sm80" (mma.sync)
  std::string schedule = "none";  // sm90: "static" or "dynamic" (PrefillSchedule); sm80 has none (a plain grid)
};
// Paged decode, one query token per sequence over `context` cached tokens (FlashInfer's and vLLM's decode
// shape): bandwidth-bound, so measured in bytes of the cache read (K and V, plus int8 / fp8 scales) per second.
struct CudaDecodeCase {
  int64_t B, context, Hq, Hkv, D, block_size;
  DType kv_dtype;
};
struct CudaDecodeRow {
  CudaDecodeCase shape;
  double median_s = 0, min_s = 0;
  double gbps = 0;  // cache bytes read per second
};
// Gated DeltaNet's one-token recurrent decode (fla's fused_recurrent_gated_delta_rule shape): the f32 state
// [B, H, K, V] read and written in place once per step, so measured in state bytes read + written per second,
// the same count as the copy bandwidth's.
struct CudaStateDecodeCase {
  int64_t B, H, K, V;
};
struct CudaStateDecodeRow {
  CudaStateDecodeCase shape;
  double median_s = 0, min_s = 0;
  double gbps = 0;  // state bytes read + written per second
};
struct CudaKernelReport {
  std::string device;  // "cuda:0 NVIDIA H200, sm_90, 132 SMs, 139.8 GiB"
  double copy_gbps = 0;  // device-to-device copy, bytes read + written per second
  std::vector<CudaPrefillRow> prefill;
  std::vector<CudaDecodeRow> decode;
  std::vector<CudaStateDecodeRow> gated_delta_decode;
  std::vector<LinearRow> state_decode;   // the other linear / state-space decode kernels (cuda_linear_bench.h)
  std::vector<LinearRow> chunk_prefill;  // chunked prefill of the linear family, or why the entry refused
  std::vector<LinearRow> mla_decode;     // DeepSeek-V3's absorbed MLA decode (cuda_mla_bench.h)
  std::vector<LinearRow> quant_gemv;     // decode projections over GGUF-format weights (cuda_gemv_bench.h)
  std::vector<LinearRow> sampling;       // a decode step's logits sampled on the device (cuda_sampling_bench.h)
  std::vector<LinearRow> gemm;           // the projections' GEMM, ours and cuBLASLt (cuda_gemm_bench.h)
  std::vector<LinearRow> conv_prefill;   // the short convolution's prefill (cuda_conv_bench.h)
  // A model step's small kernels (cuda_step_bench.h): the paged KV write, the embedding gather, DeepSeek's
  // grouped routing.
  std::vector<BandwidthTableRows> step;
  std::vector<LinearRow> moe_router;       // a MoE feed-forward's f32 router and top-k (cuda_moe_bench.h)
  std::vector<LinearRow> moe_experts;      // and its routed experts, grouped by expert
  // GGUF blocks to bf16, Gated DeltaNet's and KDA's gates, the element-wise kernels, the transpose and the row
  // copy (cuda_layer_bench.h).
  std::vector<BandwidthTableRows> layer;
  // The runners' own: RWKV-7's step kernels, gpt-oss's expert bias and SwiGLU, MLA's head rows, the MoE grouping
  // (cuda_runner_bench.h).
  std::vector<BandwidthTableRows> runner;
};

std::vector<CudaPrefillCase> cuda_prefill_cases(Scale s);
// FLOPs of the two products of attention over the visible (query, key) pairs: 4 * B * Hq * D * pairs.
double prefill_flops(const CudaPrefillCase& c);
std::vector<CudaDecodeCase> cuda_decode_cases(Scale s);
// Bytes of K and V (and their scales) a decode step reads: every cached row of every kv head once.
double decode_cache_bytes(const CudaDecodeCase& c);
std::vector<CudaStateDecodeCase> cuda_state_decode_cases(Scale s);
double state_decode_bytes(const CudaStateDecodeCase& c);  // 2 * B * H * K * V * 4
// Device-to-device copy of `bytes` on the current stream, bytes read + written per second (median of `reps`).
double measure_copy_gbps(Device device, size_t bytes, int reps);
// DeviceError without a GPU (or without CUDA in this build).
CudaKernelReport run_cuda_kernel_report(Scale s, Device device);
std::string format_cuda_text(const CudaKernelReport& r);
std::string format_cuda_json(const CudaKernelReport& r);

}  // namespace attnzoo::bench
