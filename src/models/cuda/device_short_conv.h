#pragma once
// LFM2's gated short convolution (layers/short_conv_mixer.h) as a GPU block (device_blocks.h), f32 activations:
// [B | C | x] = in_proj(h), B * x, the causal conv (no activation) over the whole ragged batch from the tails in
// the pool's slots, advanced in place there (device_conv_state.h), times C, out_proj added into the residual
// stream.
#include <memory>

#include "layers/short_conv_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_short_conv(const ShortConvMixer& mixer, const DeviceLoad& load);

}  // namespace attnzoo
