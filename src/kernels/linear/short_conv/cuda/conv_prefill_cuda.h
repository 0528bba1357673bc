#pragma once
// The causal short convolution's prefill on an NVIDIA GPU (causal_conv1d over [B, T, D], packed sequences with
// cu_seqlens, an optional initial conv state and the final rolling tail written for decode). Two launches on one
// stream: the outputs, a thread per channel walking a tile of one sequence's tokens with its window in registers;
// then the final states, a thread per (sequence, channel), so a final state that aliases the initial one is only
// written after every read of it (see conv_prefill_kernel.cuh). Same semantics as causal_conv1d_reference; no
// CUDA headers here.
#include "core/device.h"
#include "kernels/linear/short_conv/conv_problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_conv_problem's checks: every tensor's data aligned to its element
// size; at most 2^31 - 1 thread blocks per launch. ArgumentError naming the argument.
void check_cuda_conv_prefill(const ConvProblem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`. Host metadata (the tiles of
// the sequences) is uploaded stream-ordered, so nothing needs to outlive the call on the host.
void conv_prefill_cuda(const ConvProblem& p, Stream stream);

}  // namespace attnzoo
