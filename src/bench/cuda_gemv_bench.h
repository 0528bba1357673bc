#pragma once
// The quantized decode projections of `attnzoo bench kernels --device cuda` (issue 27): y = x w^T for M = 1 and 8
// activation rows over a weight in each GGUF format the CUDA GEMV takes, at Llama-3-8B's shapes (w [4096, 4096]:
// q / o_proj; w [4096, 14336]: down_proj), through quant_gemv_tensors with device tensors as a model step calls it.
// Weight-bandwidth bound, so measured in GB/s of the weight's bytes read (each byte once per call; the
// activations and outputs, at most 8 x 14336 x 4 bytes, are left out) beside the copy bandwidth.
#include <string>
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

// kernel "gemv_<format>" (gemv_Q4_K, gemv_BF16), dims M, N, K and the weight's row_bytes.
std::vector<LinearCase> quant_gemv_cases(Scale s);
double quant_gemv_bytes(const LinearCase& c);  // N x row_bytes
// Every case's row on `device` (the CPU too: make test runs them there); an entry's refusal becomes the row's error.
std::vector<LinearRow> run_quant_gemv_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
std::string format_quant_gemv_text(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_quant_gemv_json(const std::vector<LinearRow>& rows, double copy_gbps);

}  // namespace attnzoo::bench
