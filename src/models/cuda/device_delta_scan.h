#pragma once
// The delta-rule scan of the GPU runner's Gated DeltaNet and KDA mixers over the packed batch, on DeviceConvStates'
// states: the pool's rows, addressed through the step's slots (ssm_state_indices) on every step.
#include "kernels/linear/common/delta_problem.h"
#include "models/cuda/device_conv_state.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

using DeltaEntry = void (*)(const DeltaArgs&);

// `a` brings q k v g beta o as contiguous [1, T, ...] views; this adds the states (the initial and the final state:
// the pool's slots, updated in place), the slot indices, the batch's cu_seqlens (none on a decode step) and the
// in-kernel q / k l2norm, and runs `recurrent` or `chunk`.
void run_delta_scan(const DeviceStep& step, const DeviceConvStates& states, DeltaArgs a, DeltaEntry recurrent,
                    DeltaEntry chunk);

}  // namespace attnzoo
