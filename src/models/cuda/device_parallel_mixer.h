#pragma once
// ParallelMixer (layers/parallel_mixer.h, Falcon-H1's attention beside Mamba-2) as a GPU block (device_blocks.h):
// each branch is its kind's DeviceMixer (make_device_mixer) run on the same normed rows, one after the other,
//   x += sum_i out_scale_i * branch_i(in_scale_i * h)
// An attention or Mamba-2 branch folds its scales into its projections' weights at load (device_weight_fold.h), so
// it reads h and adds into x straight. Where it cannot (GGUF blocks kept as stored, another kind of branch), a
// branch whose in_scale is not 1 reads a scaled bf16 copy of h, and one whose out_scale is not 1 adds into a zeroed
// f32 scratch that is then added into the residual stream scaled (add_scaled_cuda), as the runner stages a scaled
// sublayer. The branches read the layer's pool memory as their own:
// the paged cache belongs to the one attention branch, and check_decoder_runs_on_cuda has refused a recurrent
// branch whose state does not start the slot (only the first stateful branch does).
#include <memory>

#include "layers/parallel_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_parallel_mixer(const ParallelMixer& mixer, const DeviceLoad& load);

}  // namespace attnzoo
