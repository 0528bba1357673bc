#pragma once
// delta_chunk.cu's three kernels in its order, on the emulator: for the cases of every plan that runs them (the
// delta rule's own cases and the pool-state prefills).
#include "kernels/linear/common/cuda/delta_chunk_intra.cuh"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/delta_chunk_output.cuh"
#include "kernels/linear/common/cuda/delta_chunk_state.cuh"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

template <int C>
void run_delta_chunk_stages(const cuda_delta_chunk::ChunkLaunch& l) {
  using namespace cuda_delta_chunk;
  const Params& p = l.params;
  if (l.intra_grid)
    launch(dim3(l.intra_grid), kThreads, l.intra_smem, [&](unsigned char* smem) { delta_chunk_intra<C>(p, smem); });
  launch(dim3(l.state_grid), kThreads, l.state_smem, [&](unsigned char* smem) { delta_chunk_state<C>(p, smem); });
  if (l.output_grid)
    launch(dim3(l.output_grid), kThreads, l.output_smem,
           [&](unsigned char* smem) { delta_chunk_output<C>(p, smem); });
}

}  // namespace attnzoo::cuda_emulation
