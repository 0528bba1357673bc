#pragma once
// Mamba's selective scan on an NVIDIA GPU, one token at a time: the decode step (selective_state_update) and the
// scan of short inputs. Sixteen lanes share a channel, each holding state entries of it in registers across the
// sequence's tokens, so the state is read once and written once per call (see selective_scan_kernel.cuh). Same
// semantics as selective_scan_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/mamba/problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_selective_scan_problem's checks: state size N <= 256 (the entries
// sixteen lanes keep in registers, 16 a lane at most: Falcon-H1's and Mamba-2's widest); every tensor's data aligned to its element size; at most 2^31 - 1 thread
// blocks. ArgumentError naming the argument.
void check_cuda_selective_scan(const SelectiveScanProblem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`. Host metadata (the packed
// sequences) is uploaded stream-ordered, so nothing needs to outlive the call on the host.
void selective_scan_cuda(const SelectiveScanProblem& p, Stream stream);

}  // namespace attnzoo
