#pragma once
// A long prefill's chunked RWKV-7 in pieces of bounded scratch (the GPU runner's, rwkv7_cuda_runner.h). The CUDA
// chunk takes stream-ordered scratch per chunk of every sequence (rwkv7_chunk_scratch_per_chunk: 3.5 MB per
// 64-token chunk at 40 heads of 64, so ~0.9 GB for 4 x 4096 tokens); split at chunk boundaries of the sequences,
// the pieces run one after another on the stream, a sequence cut between two carrying its f32 state through its
// slot (or its row of in-place dense states): the same products on the same operands, so the same bits as one call.
// Plain C++: tested in `make test` (rwkv7_prefill_pieces_test.cc) and, through the CUDA chunk's device code, under
// the emulator (EmulatedRwkv7Chunk.PiecesMatchOneCall).
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/linear/rwkv7/rwkv7.h"

namespace attnzoo {

struct Rwkv7PrefillPiece {
  int64_t first_row = 0, rows = 0;  // token rows [first_row, first_row + rows) of the packed batch
  int64_t first_seq = 0;            // its sequences: [first_seq, first_seq + cu_seqlens.size() - 1)
  std::vector<int32_t> cu_seqlens;  // relative to first_row; a sequence cut by a piece's end goes on in the next
};

// Pieces of at most max_chunks chunks of chunk_size tokens (a sequence's tokens counted in chunks from its start,
// so every cut lands on one of its chunk boundaries) over the packed batch cu_seqlens, in order; empty sequences
// ride along with the piece they fall in. One piece when the whole batch fits. ArgumentError naming chunk_size or
// max_chunks when below 1, cu_seqlens when it does not start at 0 or decreases.
std::vector<Rwkv7PrefillPiece> plan_rwkv7_prefill_pieces(std::span<const int32_t> cu_seqlens, int64_t chunk_size,
                                                         int64_t max_chunks);

// `whole` (a packed [1, T, H, *] call over cu_seqlens, states in place: a pool with ssm_state_indices, or dense
// initial_state == final_state) cut to `piece`: the per-token tensors' rows, the piece's cu_seqlens (pointing into
// `piece`, which must outlive the call), the state indices or dense state rows from its first sequence.
// ArgumentError naming final_state when the states are not in place (a cut sequence would lose its state).
Rwkv7Args rwkv7_piece_args(const Rwkv7Args& whole, const Rwkv7PrefillPiece& piece);

}  // namespace attnzoo
