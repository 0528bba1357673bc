#pragma once
// The short convolution's prefill in `attnzoo bench kernels --device cuda`: causal_conv1d (width 4, bias, SiLU,
// bf16) over B x T tokens of dim channels, through the public entry with device tensors as a model's prefill calls
// it, at Qwen3-Next's shape (the q / k / v convolution: dim 8192) and Mamba-2 2.7B's (5376 = 5120 + 2 x 128), B 4 x
// T 4096. Bandwidth-bound: GB/s of x read and y written (the weights and bias, a few KiB, left out), beside the
// copy bandwidth. scripts/gpu_peers.py times causal-conv1d's kernel, fla's Triton one or torch's conv1d beside it.
#include <string>
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

// kernel "conv1d_prefill", dims B, T, D, W.
std::vector<LinearCase> conv_prefill_cases(Scale s);
double conv_prefill_bytes(const LinearCase& c);  // 2 x B x T x D x 2 (bf16 x in, y out)
std::vector<LinearRow> run_conv_prefill_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
std::string format_conv_prefill_text(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_conv_prefill_json(const std::vector<LinearRow>& rows, double copy_gbps);

}  // namespace attnzoo::bench
