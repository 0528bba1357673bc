#pragma once
// RWKV-7's chunked prefill on an NVIDIA GPU (fla's chunk_dplr_delta_rule), on mma.sync tensor cores, in three
// kernels shaped as the chunked delta rule's (common/cuda/delta_chunk_cuda.h). Per chunk of C tokens, G the
// cumulative log decay through each token (per key channel), G_{-1} = 0:
//   1. intra (parallel over chunks, rwkv7_chunk_intra.cuh): the four decayed Gram matrices A_qk, A_qb, A_ak, A_ab
//      (16-row sub-chunks with a reference point each, rwkv7_chunk_gram.cuh), T = (I - A_ab)^-1,
//      W = T (a e^{G_{i-1}}), U = (T A_ak) V, and what the other passes read: q e^{G}, k and b decayed to the
//      chunk's end, [A_qk | A_qb], e^{G_last}
//   2. state (sequential over a sequence's chunks, rwkv7_chunk_state.cuh): the low-rank reads SA = W S + U, then
//      S <- e^{G_last} S + [k; b]^T-decayed [V; SA], the state slice held in MMA accumulators
//   3. output (parallel over chunks, rwkv7_chunk_output.cuh): O = (q e^{G}) S + [A_qk | A_qb] [V; SA]
// Every exponent is a decay towards the future (<= 0 for w <= 0) or, on a diagonal block whose decays are mild
// enough, bounded by 60, so no factor overflows at any decay strength.
// States are dense [N, H, K, V] or, with ssm_state_indices, the pool's rows: the state pass reads each sequence's
// slot once before its first chunk and writes it once after its last; a pad's (-1) chunks touch nothing.
// Products run on bf16 operands with f32 accumulation (as the delta family's chunks: a relative RMS error of a few
// 1e-3 against the double reference); the state carried between chunks is f32. No CUDA headers here.
#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "kernels/linear/rwkv7/problem.h"

namespace attnzoo {

// What only the CUDA chunked path requires beyond make_rwkv7_problem's checks, ArgumentError naming the argument:
// K <= 128 and V <= 128, chunk_size 16, 32 or 64, data aligned to its element size, grids within 2^31 - 1 thread
// blocks. (The shared memory a block needs is checked against the device at launch: ~98 KB at K = 64 with 64-token
// chunks, within every sm_80+ GPU's limit; ~158 KB at K = 128, past sm_86 / sm_89's 99 KB, where a smaller
// chunk_size fits.)
void check_cuda_rwkv7_chunk(const Rwkv7Problem& p, int64_t chunk_size);

// The stream-ordered scratch chunk_rwkv7_cuda takes per chunk of C = chunk_size tokens of one sequence, all H heads
// (88 KB per head at K = V = 64 and C = 64): the launch allocates this times the problem's chunks (each sequence's
// ceil(len / C)), plus the chunk table and the 256-byte alignment of its eight regions. A caller bounds it by
// splitting a prefill into pieces of fewer chunks, the state carried in place (models/cuda/rwkv7_prefill_pieces.h).
size_t rwkv7_chunk_scratch_per_chunk(int64_t H, int64_t K, int64_t V, int64_t chunk_size);

// Runs a validated problem whose tensors live on the current device, on `stream`: uploads the chunk table, takes
// stream-ordered scratch (per chunk and head W, U, the decayed k / b / q, [V; SA], [A_qk | A_qb] and the state
// before the chunk: 88 KB at K = V = 64 with 64-token chunks, so 0.9 GB for 4 x 4096 tokens of 40 heads), launches
// the three kernels. ArgumentError naming r when the current device cannot give
// a block the shared memory the shape needs.
void chunk_rwkv7_cuda(const Rwkv7Problem& p, int64_t chunk_size, Stream stream);

}  // namespace attnzoo
