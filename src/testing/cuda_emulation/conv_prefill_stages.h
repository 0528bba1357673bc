#pragma once
// conv_prefill.cu's two kernels on the emulator, the plan's metadata (the sequences' offsets) uploaded as the
// launcher does and the output kernel chosen by the window: for the prefill's own cases and the pool-state prefills.
#include <cstdint>

#include "kernels/linear/short_conv/cuda/conv_prefill_kernel.cuh"
#include "kernels/linear/short_conv/cuda/conv_prefill_launch.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/packed_offsets.h"

namespace attnzoo::cuda_emulation {

inline void run_conv_prefill(cuda_conv_prefill::PrefillLaunch& l, uint64_t seed) {
  using namespace cuda_conv_prefill;
  launch_with_offsets(l.metadata, &l.params.seq_offsets, [&] {
    seed_schedule(seed);
    if (l.output_grid > 0)
      launch(dim3(l.output_grid), int(l.threads), 0, [&](unsigned char*) {
        switch (l.window) {
          case 4: conv_prefill_output_thread<4>(l.params); break;
          case 8: conv_prefill_output_thread<8>(l.params); break;
          default: conv_prefill_output_thread<16>(l.params); break;
        }
      });
    if (l.state_grid > 0)
      launch(dim3(l.state_grid), int(l.threads), 0, [&](unsigned char*) { conv_prefill_state_thread(l.params); });
  });
}

}  // namespace attnzoo::cuda_emulation
