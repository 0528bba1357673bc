#pragma once
// delta_recurrent.cu's launch on the emulator, the kernel for the problem's gate: for the delta family's own
// cases and the pool-state decode steps.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_recurrent_kernel.cuh"
#include "kernels/linear/common/cuda/delta_recurrent_launch.h"
#include "kernels/linear/common/delta_problem.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/packed_offsets.h"

namespace attnzoo::cuda_emulation {

inline void run_delta_recurrent(cuda_delta::RecurrentLaunch& l, DeltaGate gate, uint64_t seed) {
  launch_packed_plan(l, 0, seed, [&](unsigned char*) {
    switch (gate) {
      case DeltaGate::none: cuda_delta::delta_recurrent_cta<DeltaGate::none>(l.params); break;
      case DeltaGate::head: cuda_delta::delta_recurrent_cta<DeltaGate::head>(l.params); break;
      case DeltaGate::channel: cuda_delta::delta_recurrent_cta<DeltaGate::channel>(l.params); break;
    }
  });
}

}  // namespace attnzoo::cuda_emulation
