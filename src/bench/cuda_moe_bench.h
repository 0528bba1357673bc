#pragma once
// A mixture-of-experts feed-forward's kernels in `attnzoo bench kernels --device cuda`, as the GPU runner's
// DeviceMoe (models/cuda/device_moe.cc) launches them over Qwen3-30B-A3B's shapes (E 128, top_k 8, hidden 2048,
// expert intermediate 768) for a decode step of 64 tokens and a 4096-token prefill:
//   moe_router   the f32 router as f32 dots over the bf16 normed rows (router_logits_cuda), then the softmax
//                top-k (route_top_k_cuda): GB/s of the router's f32 weights, the rows, the logits and the ids
//   moe_experts  the grouping by expert, the gather, the [gate|up] grouped GEMM, SiLU(gate) * up, the down grouped
//                GEMM and the combine into the residual stream, over a balanced routing (every expert n / E rows,
//                what a trained router's load balancing aims at): GB/s of the expert weights the step reads (every
//                expert once T top_k reaches E) and TFLOP/s of the two GEMMs (2 n 3 I H)
// On the CPU (make test) the same rows run the CPU twins (Linear's f32 router and route_softmax_top_k;
// run_routed_experts over GatedMlp experts) on the same arguments.
#include <string>
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

std::vector<LinearCase> moe_router_cases(Scale s);   // dims T, E, H, top_k
std::vector<LinearCase> moe_experts_cases(Scale s);  // dims T, E, top_k, H, I
double moe_router_bytes(const LinearCase& c);   // E H 4 + T H 2 + T E 4 + T top_k 8
double moe_experts_bytes(const LinearCase& c);  // min(E, T top_k) 3 I H 2 + T H (2 + 8): weights, rows, stream
double moe_experts_flops(const LinearCase& c);  // 2 T top_k 3 I H

std::vector<LinearRow> run_moe_router_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
std::vector<LinearRow> run_moe_experts_rows(Scale s, Device device, Stream stream, const RowTimer& timer);

// gemm_tflops: the run's best bf16 GEMM row (best_gemm_tflops), the experts' TFLOP/s share's denominator.
std::string format_moe_text(const std::vector<LinearRow>& router, const std::vector<LinearRow>& experts,
                            double copy_gbps, double gemm_tflops);
std::string format_moe_router_json(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_moe_experts_json(const std::vector<LinearRow>& rows, double copy_gbps, double gemm_tflops);

}  // namespace attnzoo::bench
