#pragma once
// rwkv7_recurrent.cu's launch on the emulator: for RWKV-7's own cases and the pool-state decode steps.
#include <cstdint>

#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_kernel.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/packed_offsets.h"

namespace attnzoo::cuda_emulation {

inline void run_rwkv7_recurrent(cuda_rwkv7::RecurrentLaunch& l, uint64_t seed) {
  launch_packed_plan(l, l.smem_bytes, seed,
                     [&](unsigned char* smem) { cuda_rwkv7::rwkv7_recurrent_cta(l.params, smem); });
}

}  // namespace attnzoo::cuda_emulation
