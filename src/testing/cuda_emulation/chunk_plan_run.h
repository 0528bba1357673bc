#pragma once
// Runs a chunked plan (delta_chunk, gla_chunk and through it mamba2_chunk) on the emulator the way its .cu runs
// it on a GPU: one allocation for the metadata and the scratch, filled with 0xff bytes first so that a piece a
// kernel reads before any kernel writes it shows, the metadata copied to its start, the plan's pointers bound
// into it, then the case's stages for the plan's chunk size.
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

}  // namespace attnzoo::cuda_emulation
