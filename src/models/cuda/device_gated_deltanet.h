#pragma once
// The Gated DeltaNet mixer (layers/gated_deltanet_mixer.h: Qwen3-Next / Qwen3.5 "linear_attention" layers) as a GPU
// block (device_blocks.h), f32 activations: the in_proj sources side by side and their runs regrouped into the
// conv input, z, b and a; the gates (delta_gates_cuda); the causal conv over q k v; the gated delta rule (q / k
// l2-normed in the kernel) over the whole ragged batch in place in the pool's slots (device_conv_state.h); the
// per-head RMSNorm times silu(z) and out_proj added into the residual stream.
#include <memory>

#include "layers/gated_deltanet_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_gated_deltanet(const GatedDeltaNetMixer& mixer, const DeviceLoad& load);

}  // namespace attnzoo
