#pragma once
// The projection GEMM rows of `attnzoo bench kernels --device cuda` (issue 27): gemm_cuda at Llama-3-8B's
// prefill shapes (M = 4096 tokens; q / o projections N = K = 4096, gate / up N = 14336, down K = 14336) and one
// shorter prefill (M = 512, where the small tile runs), bf16 in and out, each through our kernel and through
// cuBLASLt (a row "not available" saying why in builds without it), in TFLOP/s of 2 M N K. gpu_peers.py's cuBLAS
// bf16 GEMM through torch is the peak they are read against. Decode's M 1..8 is the quantized GEMV's, not here.
#include <string>
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

std::vector<LinearCase> gemm_cases(Scale s);  // kernel gemm_ours / gemm_cublaslt, dims M N K
double gemm_flops(const LinearCase& c);       // 2 M N K
std::vector<LinearRow> run_gemm_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
// The fastest available row's TFLOP/s (ours or cuBLASLt): the run's measured bf16 GEMM rate, which the MoE rows
// compare with; 0 when no row ran.
double best_gemm_tflops(const std::vector<LinearRow>& rows);
std::string format_gemm_text(const std::vector<LinearRow>& rows);
std::string format_gemm_json(const std::vector<LinearRow>& rows);

}  // namespace attnzoo::bench
