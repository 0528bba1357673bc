#pragma once
// The causal short convolution's decode step on an NVIDIA GPU (causal_conv1d_update): L new tokens per sequence
// against a rolling state [N, D, S] f32 advanced in place. A thread per (sequence, channel) reads its S state
// entries, its L inputs and W taps once and writes L outputs and S state entries (see conv_update_kernel.cuh).
// Same semantics as causal_conv1d_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/short_conv/conv_problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_conv_problem's checks: every tensor's data aligned to its element
// size; at most 2^31 - 1 thread blocks. ArgumentError naming the argument.
void check_cuda_conv_update(const ConvProblem& p);

// Runs a validated decode step (padded sequences of equal length, final state == initial state) whose tensors
// live on the current device, on `stream`.
void conv_update_cuda(const ConvProblem& p, Stream stream);

}  // namespace attnzoo
