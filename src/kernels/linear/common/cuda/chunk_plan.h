#pragma once
// The planning the chunked launches share (delta_chunk_launch.cc, gla_chunk_launch.cc and, through GLA,
// mamba2_chunk_launch.cc): the limits every chunked kernel has, the split of sequences into chunks, and the
// layout of the one allocation that holds the uploaded metadata and the scratch.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/sequences.h"

namespace attnzoo::cuda_delta_chunk {

// How many chunks the sequences make: chunks never cross sequences, so each sequence rounds up on its own.
int64_t chunk_count(const SequenceSpans& seqs, int64_t chunk_size);

// Refuses key and value widths past kMaxDim and chunks past 64 tokens. The problem's own names go into the
// errors: key_arg / value_arg name the refused tensor, key_dim / value_dim how its width reads ("K", "head dim P").
void check_chunk_shape(int64_t K, const char* key_arg, const char* key_dim, int64_t V, const char* value_arg,
                       const char* value_dim, int64_t chunk_size);

// chunks: each sequence's tokens in chunks of C, the last possibly short, an empty sequence none;
// seq_chunks [N + 1]: sequence n's chunks are [seq_chunks[n], seq_chunks[n + 1]).
void split_into_chunks(const SequenceSpans& seqs, int C, std::vector<ChunkDesc>& chunks,
                       std::vector<int32_t>& seq_chunks);

// Byte offsets in one allocation, every piece 256-byte aligned; take() returns where the next piece starts.
struct ScratchLayout {
  size_t end = 0;
  size_t take(size_t bytes) {
    const size_t here = end;
    end = (end + bytes + 255) / 256 * 256;
    return here;
  }
};

// The chunk list and sequence offsets, laid out at chunks_at / seq_chunks_at of `bytes` for the upload.
void write_chunk_metadata(const std::vector<ChunkDesc>& chunks, size_t chunks_at,
                          const std::vector<int32_t>& seq_chunks, size_t seq_chunks_at,
                          std::vector<unsigned char>& bytes);

}  // namespace attnzoo::cuda_delta_chunk
