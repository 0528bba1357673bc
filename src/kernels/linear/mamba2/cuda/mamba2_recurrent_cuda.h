#pragma once
// Mamba-2's recurrence on an NVIDIA GPU, one token at a time: the decode step (mamba2_state_update) and the
// recurrent form of short inputs. Each warp keeps a few state rows in registers across the sequence's tokens, so
// the state is read once and written once per call however many tokens it holds (see
// mamba2_recurrent_kernel.cuh). Same semantics as mamba2_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/mamba2/problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_mamba2_problem's checks: state size N <= 256 (the columns a warp
// spreads over its lanes' registers); every tensor's data aligned to its element size; at most 2^31 - 1 thread
// blocks. ArgumentError naming the argument.
void check_cuda_mamba2_recurrent(const Mamba2Problem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`. Host metadata (the
// sequences) is uploaded stream-ordered, so nothing needs to outlive the call on the host.
void recurrent_mamba2_cuda(const Mamba2Problem& p, Stream stream);

}  // namespace attnzoo
