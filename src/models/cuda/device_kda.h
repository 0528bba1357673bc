#pragma once
// The Kimi Delta Attention mixer (layers/kda_mixer.h: Kimi Linear's "linear_attention" layers) as a GPU block
// (device_blocks.h), f32 activations: q / k / v projected side by side, the low-rank forget gate and the write
// strength turned into per-channel log decays and betas (delta_gates_cuda), the causal conv over q k v, KDA (q / k
// l2-normed in the kernel) over the whole ragged batch in place in the pool's slots (device_conv_state.h), the
// per-head RMSNorm times sigmoid of the low-rank output gate, o_proj added into the
// residual stream.
#include <memory>

#include "layers/kda_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_kda(const KdaMixer& mixer, const DeviceLoad& load);

}  // namespace attnzoo
