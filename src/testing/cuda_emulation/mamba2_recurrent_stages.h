#pragma once
// mamba2_recurrent.cu's launch on the emulator, its kernel chosen by the plan's state columns per lane: for
// Mamba-2's own cases and the pool-state prefills and decode steps.
#include <cstdint>

#include "kernels/linear/mamba2/cuda/mamba2_recurrent_kernel.cuh"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/packed_offsets.h"

namespace attnzoo::cuda_emulation {

inline void run_mamba2_recurrent(cuda_mamba2::RecurrentLaunch& l, uint64_t seed) {
  launch_packed_plan(l, 0, seed, [&](unsigned char*) {
    switch (l.cols_per_lane) {
      case 2: cuda_mamba2::mamba2_recurrent_warp<2>(l.params); break;
      case 4: cuda_mamba2::mamba2_recurrent_warp<4>(l.params); break;
      default: cuda_mamba2::mamba2_recurrent_warp<8>(l.params); break;
    }
  });
}

}  // namespace attnzoo::cuda_emulation
