#pragma once
// Runs a chunked plan (delta_chunk, gla_chunk and through it mamba2_chunk) on the emulator the way its .cu runs
// it on a GPU: one allocation for the metadata and the scratch, filled with 0xff bytes first so that a piece a
// kernel reads before any kernel writes it shows, the metadata copied to its start, the plan's pointers bound
// into it, then the case's stages for the plan's chunk size. And the chunking the three families' plans share.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

// run_stages(std::integral_constant<int, C>{}) launches the C-token kernels; metadata_bytes_of and bind_scratch
// are the plan's own, found through its namespace.
template <class ChunkLaunch, class RunStages>
void run_chunk_plan(ChunkLaunch& l, uint64_t seed, RunStages&& run_stages) {
  DeviceMemory scratch(l.scratch_bytes);
  std::memset(scratch.data(), 0xff, scratch.size());
  const std::vector<unsigned char> metadata = metadata_bytes_of(l);
  std::memcpy(scratch.data(), metadata.data(), metadata.size());
  bind_scratch(l, scratch.data());
  seed_schedule(seed);
  switch (l.C) {
    case 16: run_stages(std::integral_constant<int, 16>{}); break;
    case 32: run_stages(std::integral_constant<int, 32>{}); break;
    default: run_stages(std::integral_constant<int, 64>{}); break;
  }
}

// The chunks of packed sequences of 1, 0, 64 and 35 tokens (cu_seqlens {0, 1, 1, 65, 100}) at 32 tokens a chunk,
// for two heads of K = 40, V = 48: chunks never cross sequences, empty sequences own none, K and V padded to the
// 16- and 32-wide tiles, a state CTA per head and 32-column slice of each sequence.
template <class ChunkLaunch>
void expect_ragged_example_chunks(const ChunkLaunch& l) {
  EXPECT_EQ(l.seq_chunks, (std::vector<int32_t>{0, 1, 1, 3, 5}));
  ASSERT_EQ(l.chunks.size(), 5u);
  const int64_t rows[] = {0, 1, 33, 65, 97};
  const int32_t lens[] = {1, 32, 32, 32, 3};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(l.chunks[i].row, rows[i]);
    EXPECT_EQ(l.chunks[i].len, lens[i]);
  }
  EXPECT_EQ(l.params.Kp, 48);
  EXPECT_EQ(l.params.Vp, 64);
  EXPECT_EQ(l.state_grid, 4u * 2 * 2);
}

}  // namespace attnzoo::cuda_emulation
