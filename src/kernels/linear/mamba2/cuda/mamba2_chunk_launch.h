#pragma once
// Mamba-2's chunked SSD as a plan of the gated linear recurrence's chunked kernels (gla_chunk_launch.h), decided
// on the host. Plain C++: mamba2_chunk.cu runs the plan as chunk_gla_cuda does; the kernel emulator
// (testing/cuda_emulation) runs the same plan through the same device code.
#include "kernels/linear/common/cuda/gla_chunk_launch.h"
#include "kernels/linear/mamba2/problem.h"

namespace attnzoo::cuda_mamba2 {

// For a problem check_cuda_mamba2_chunk accepts.
cuda_gla_chunk::ChunkLaunch plan_mamba2_chunk(const Mamba2Problem& p);

}  // namespace attnzoo::cuda_mamba2
