#pragma once
// RWKV-7's recurrence on an NVIDIA GPU, one token at a time: the decode step, and the recurrent form of prefill
// (fla's fused_recurrent_rwkv7). A CTA owns one (sequence, head, slice of V columns) and keeps that slice of the
// f32 state in registers across the sequence's tokens, so the state is read from memory once and written once per
// call however many tokens it holds (see rwkv7_recurrent_kernel.cuh). Same semantics as rwkv7_reference; no CUDA
// headers here.
#include "core/device.h"
#include "kernels/linear/rwkv7/problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_rwkv7_problem's checks: K <= 256 (the state rows one thread block
// spreads over its threads' registers); every tensor's data aligned to its element size; at most 2^31 - 1 thread
// blocks. ArgumentError naming the argument.
void check_cuda_rwkv7_recurrent(const Rwkv7Problem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`. Host metadata (the sequences)
// is uploaded stream-ordered, so nothing needs to outlive the call on the host. No value scan: like the CPU entry,
// the C++ entry takes the values as given (the Python wrapper scans them when check_inputs).
void recurrent_rwkv7_cuda(const Rwkv7Problem& p, Stream stream);

}  // namespace attnzoo
