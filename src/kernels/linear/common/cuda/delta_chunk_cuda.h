#pragma once
// The chunked (prefill) delta rule, gated delta rule and KDA on an NVIDIA GPU, on mma.sync tensor cores, in three
// kernels (fla's chunk_gated_delta_rule decomposition; C = chunk_size tokens per chunk, G the cumulative log
// decay inside a chunk, Gamma_ij = exp(G_i - G_j) for i >= j):
//   1. intra (parallel over chunks):  A = strict_tril(diag(beta) K K^T . Gamma), T = (I + A)^-1,
//      W = T diag(beta exp(G)) K, U = T diag(beta) V, Kd = K exp(G_last - G)      (delta_chunk_intra.cuh)
//   2. state (sequential over a sequence's chunks, parallel over value heads and 32-column state slices):
//      v_new = U - W h, h <- exp(G_last) h + Kd^T v_new                         (delta_chunk_state.cuh)
//   3. output (parallel over chunks): o = exp(G) (Q h) + tril(Q K^T . Gamma) v_new  (delta_chunk_output.cuh)
// KDA's per-channel decays enter the Gram matrices through 16-row sub-chunks with a reference point each
// (delta_chunk_gram.cuh) and the keys, queries and state rows elementwise.
// Products run on bf16 operands with f32 accumulation (inputs of any float dtype are rounded to bf16 for them);
// the state carried between chunks stays f32, h and v_new pass between the kernels as bf16. Against the
// double-precision reference that is a relative RMS error of about 4e-3 (the tests allow 1e-2), about what a
// bf16 input costs the CPU kernels. Same semantics as delta_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo {

// What only the CUDA chunked path requires beyond make_delta_problem's checks, ArgumentError naming the
// argument: K <= 128 and V <= 128 (a row is staged four columns per lane), chunk_size 16, 32 or 64 (one 16-row
// MMA block per warp), data aligned to its element size, grids within 2^31 - 1 thread blocks. (The shared
// memory a block needs is checked against the device at launch: KDA with K = 128 and 64-token chunks needs
// about 150 KB, more than sm_86 / sm_89 allow; every other shape fits 99 KB.)
void check_cuda_delta_chunk(const DeltaProblem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`: uploads the chunk table, takes
// stream-ordered scratch (per chunk and value head: W, Kd, U, v_new and the state before the chunk, bf16 but for
// U's f32: 112 KB at K = V = 128 and 64-token chunks), launches the three kernels. Nothing needs to outlive the
// call on the host. ArgumentError naming q when the current device cannot give a block the shared memory the
// shape needs.
void chunk_delta_cuda(const DeltaProblem& p, Stream stream);

}  // namespace attnzoo
