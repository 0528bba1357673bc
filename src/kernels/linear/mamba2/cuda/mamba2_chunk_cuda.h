#pragma once
// Mamba-2's chunked SSD prefill on an NVIDIA GPU: the gated linear recurrence's chunked tensor-core kernels
// (common/cuda/gla_chunk_cuda.h) with q = C, k = B shared by each group's heads (the kernels' key heads are the
// groups), v = x scaled by the step dt' and the scalar log decay A dt', both formed in the prep kernel from the
// raw dt, dt_bias and A; the output kernel adds D x and gates by silu(z). With several heads per group B in bf16
// and C B^T are formed once per (chunk, group) by the keys kernel and read by the group's heads (each head's
// decays go on its values and on its copy of the scores), so Mamba-2 2.7B's 80 heads over one group form its
// 64 x 64 scores of each chunk once. Mamba-2's [P, N] states are read and
// written in place through the state kernel's strides. Same semantics as mamba2_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/mamba2/problem.h"

namespace attnzoo {

// Whether the chunked kernels stage the problem's rows: state size N <= 128 and head dim P <= 128 (keys and
// values of the shared tiles). The device branch sends wider ones (Falcon-H1's N = 256) to the recurrent kernel.
bool cuda_mamba2_chunk_fits(const Mamba2Problem& p);

// What only the CUDA chunked path requires beyond make_mamba2_problem's checks, ArgumentError naming the
// argument: N <= 128 (B), P <= 128 (x), chunk_size 16, 32 or 64, data aligned to its element size, grids within
// 2^31 - 1 thread blocks.
void check_cuda_mamba2_chunk(const Mamba2Problem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`, as chunk_gla_cuda runs its
// plans (stream-ordered scratch and metadata upload). ArgumentError naming x when the device cannot give a
// block the shared memory the shape needs.
void chunk_mamba2_cuda(const Mamba2Problem& p, Stream stream);

}  // namespace attnzoo
