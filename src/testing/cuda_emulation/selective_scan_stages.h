#pragma once
// selective_scan.cu's launch on the emulator, its kernel chosen by the plan's state entries per lane: for the
// selective scan's own cases and the pool-state prefills.
#include <cstdint>

#include "kernels/linear/mamba/cuda/selective_scan_kernel.cuh"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/packed_offsets.h"

namespace attnzoo::cuda_emulation {

inline void run_selective_scan(cuda_mamba::ScanLaunch& l, uint64_t seed) {
  launch_packed_plan(l, 0, seed, [&](unsigned char*) {
    switch (l.per_lane) {
      case 1: cuda_mamba::selective_scan_channel<1>(l.params); break;
      case 2: cuda_mamba::selective_scan_channel<2>(l.params); break;
      case 4: cuda_mamba::selective_scan_channel<4>(l.params); break;
      case 8: cuda_mamba::selective_scan_channel<8>(l.params); break;
      default: cuda_mamba::selective_scan_channel<16>(l.params); break;
    }
  });
}

}  // namespace attnzoo::cuda_emulation
