#pragma once
// gla_chunk.cu's kernels in its order, on the emulator: for the cases of every plan that runs them (the gated
// linear families' gla_chunk_launch, Mamba-2's mamba2_chunk_launch).
#include "kernels/linear/common/cuda/gla_chunk_keys.cuh"
#include "kernels/linear/common/cuda/gla_chunk_launch.h"
#include "kernels/linear/common/cuda/gla_chunk_output.cuh"
#include "kernels/linear/common/cuda/gla_chunk_prep.cuh"
#include "kernels/linear/common/cuda/gla_chunk_state.cuh"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

template <int C>
void run_gla_chunk_stages(const cuda_gla_chunk::ChunkLaunch& l) {
  using namespace cuda_gla_chunk;
  const Params& p = l.params;
  if (l.prep_grid)
    launch(dim3(l.prep_grid), kThreads, l.prep_smem,
           [&](unsigned char* smem) { gla_chunk_prep<C>(p, reinterpret_cast<float*>(smem)); });
  if (l.keys_grid)
    launch(dim3(l.keys_grid), kThreads, l.keys_smem, [&](unsigned char* smem) { gla_chunk_keys<C>(p, smem); });
  launch(dim3(l.state_grid), kThreads, l.state_smem, [&](unsigned char* smem) { gla_chunk_state<C>(p, smem); });
  if (l.output_grid)
    launch(dim3(l.output_grid), kThreads, l.output_smem, [&](unsigned char* smem) { gla_chunk_output<C>(p, smem); });
}

}  // namespace attnzoo::cuda_emulation
