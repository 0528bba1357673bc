#pragma once
// The delta-rule scan of the GPU runner's Gated DeltaNet and KDA mixers over the packed batch, on DeviceConvStates'
// states: the pool's rows, addressed through the step's slots (ssm_state_indices) on every step. Both mixers feed it
// from their causal conv's output (run_conv_delta_scan).
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

// A mixer's heads: q and k H x K, v and o HV x V; g one log decay per value head, or per value head and key
// channel with channel_gate (KDA's).
struct DeltaHeads {
  int64_t H, K, HV, V;
  bool channel_gate = false;
};

// run_delta_scan on the causal conv's [q | k | v] rows: q, k and v copied out into contiguous rows in the workspace
// slots first_slot .. first_slot + 2, the output written to slot first_slot + 3 and returned as [T, HV V] rows.
// g [T, HV] ([T, HV K] with channel_gate) and beta [T, HV] as the gates wrote them.
TensorView run_conv_delta_scan(const DeviceStep& step, const DeviceConvStates& states, const TensorView& conv,
                               const TensorView& g, const TensorView& beta, const DeltaHeads& heads,
                               size_t first_slot, DeltaEntry recurrent, DeltaEntry chunk);

}  // namespace attnzoo
