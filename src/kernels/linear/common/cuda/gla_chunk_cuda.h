#pragma once
// The chunked (prefill) gated linear recurrence -- linear attention, retention, simple GLA, GLA -- on an NVIDIA
// GPU, on mma.sync tensor cores, in three kernels (fla's chunk_simple_gla / chunk_gla decomposition; C =
// chunk_size tokens per chunk, G the cumulative log decay inside a chunk, per head or per key channel):
//   1. prep (parallel over chunks): G, Kd = phi(K) exp(G_last - G), V in bf16, exp(G_last) (gla_chunk_prep.cuh)
//   2. state (sequential over a sequence's chunks, parallel over value heads and 32-column state slices):
//      store h;  h <- exp(G_last) h + Kd^T V                                          (gla_chunk_state.cuh)
//   3. output (parallel over chunks): o = (phi(Q) exp(G)) h + tril(phi(Q) phi(K)^T . Gamma) V
//                                                                                    (gla_chunk_output.cuh)
// With decays per value head and several value heads per key head (Mamba-2's groups; Params::shared_keys) a
// fourth, the keys kernel (gla_chunk_keys.cuh), forms phi(K), phi(Q) and phi(Q) phi(K)^T once per (chunk, key
// head) after the prep, the prep puts the decay exp(G_last - G) on V instead of K (keeping only each row's factor:
// the state pass forms the decayed values from v itself), and the output kernel takes phi(Q) and the scores from
// it rather than forming them per value head, staging V from the inputs.
// Every exponent is of a difference that is <= 0, so strong decays underflow to exact zeros and never overflow;
// GLA's per-channel scores go through the delta rule's 16-row sub-chunks (delta_chunk_gram.cuh).
// Products run on bf16 operands with f32 accumulation; the state carried between chunks stays f32, h passes to
// the output kernel as bf16. Same semantics as gated_linear_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

// What only the CUDA chunked path requires beyond make_gla_problem's checks, ArgumentError naming the argument:
// K <= 128 and V <= 128 (a row is staged four columns per lane), chunk_size 16, 32 or 64, no normaliser (the
// device branch sends linear attention's normalised form to the recurrent kernel), data aligned to its element
// size, grids within 2^31 - 1 thread blocks.
void check_cuda_gla_chunk(const GlaProblem& p);

// Runs a validated problem whose tensors live on the current device, on `stream`: uploads the chunk table (and
// a host g_gamma), takes stream-ordered scratch (per chunk and value head: Kd, V and the state before the chunk
// in bf16, the state rows' decays in f32, 64.5 KB at K = V = 128 and 64-token chunks; G in f32; with shared keys
// Kd, phi(Q) and the f32 scores per chunk and key head, an f32 factor per value row in place of V per chunk and
// value head), launches the kernels. ArgumentError naming
// q when the current device cannot give a block the shared memory the shape needs.
void chunk_gla_cuda(const GlaProblem& p, Stream stream);

namespace cuda_gla_chunk {
struct ChunkLaunch;
}
// What chunk_gla_cuda does after planning, for any plan of these kernels (Mamba-2's SSD runs through it too):
// `arg` names the argument of the shared-memory refusal.
void run_gla_chunk_plan(cuda_gla_chunk::ChunkLaunch plan, Stream stream, const char* arg);

}  // namespace attnzoo
