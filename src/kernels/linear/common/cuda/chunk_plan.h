#pragma once
// The planning the chunked launches share (delta_chunk_launch.cc, gla_chunk_launch.cc, rwkv7_chunk_launch.cc and,
// through GLA, mamba2_chunk_launch.cc): the limits every chunked kernel has, the chunk table (the sequences split
// into chunks, uploaded for the kernels) and the layout of the one allocation that holds the uploaded metadata and
// the scratch. Plain C++; the device code reads ChunkDesc.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/linear/common/sequences.h"

namespace attnzoo::cuda_delta_chunk {

// One chunk of one sequence: token rows [row, row + len) of the flattened [B * T] tokens, len in [1, C].
struct ChunkDesc {
  int64_t row;
  int32_t seq, len;
};

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// How many chunks the sequences make: chunks never cross sequences, so each sequence rounds up on its own.
int64_t chunk_count(const SequenceSpans& seqs, int64_t chunk_size);

// Refuses key and value widths past kMaxDim and chunks past 64 tokens. The problem's own names go into the
// errors: key_arg / value_arg name the refused tensor, key_dim / value_dim how its width reads ("K", "head dim P").
void check_chunk_shape(int64_t K, const char* key_arg, const char* key_dim, int64_t V, const char* value_arg,
                       const char* value_dim, int64_t chunk_size);

// Byte offsets in one allocation, every piece 256-byte aligned; take() returns where the next piece starts.
struct ScratchLayout {
  size_t end = 0;
  size_t take(size_t bytes) {
    const size_t here = end;
    end = (end + bytes + 255) / 256 * 256;
    return here;
  }
  size_t bytes() const { return std::max<size_t>(end, 256); }  // never nothing: every plan allocates once
};

// What every family's plan holds (its ChunkLaunch adds the Params, grids, shared memory and scratch offsets): the
// chunk table, where it sits in the one allocation, and the allocation's size.
struct ChunkPlan {
  bool empty = true;  // nothing to run: no sequences, or no tokens and no state to write
  int C = 64;
  std::vector<ChunkDesc> chunks;    // each sequence's tokens in chunks of C, the last possibly short, none if empty
  std::vector<int32_t> seq_chunks;  // [N + 1]: sequence n's chunks are [seq_chunks[n], seq_chunks[n + 1])
  size_t chunks_at = 0, seq_chunks_at = 0;  // the table's byte offsets in the allocation
  size_t scratch_bytes = 0;                 // the whole allocation
  size_t metadata_bytes = 0;                // its leading bytes to upload: the table and what a family adds after it

  // Leaves the plan empty without sequences, or without tokens and a final state to write; else splits the
  // sequences into chunks of chunk_size. Returns whether there is anything to run.
  bool split(const SequenceSpans& seqs, int64_t tokens, bool writes_state, int64_t chunk_size);
  // The table's place at the start of the allocation `at` lays out.
  void take_table(ScratchLayout& at);
  // The metadata_bytes to upload, the table written in (a family writes what it adds after it).
  std::vector<unsigned char> table_bytes() const;
  // Points params.chunks and params.seq_chunks at the table uploaded to the allocation at `base`.
  template <class Params>
  void bind_table(Params& params, unsigned char* base) const {
    params.chunks = reinterpret_cast<const ChunkDesc*>(base + chunks_at);
    params.seq_chunks = reinterpret_cast<const int32_t*>(base + seq_chunks_at);
  }
};

}  // namespace attnzoo::cuda_delta_chunk
