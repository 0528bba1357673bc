#pragma once
// MiniMax-Text-01 / M1's lightning attention (layers/lightning_attention_mixer.h) as a GPU block
// (device_blocks.h), f32 activations: qkv_proj, SiLU over its rows, the head-major [q | k | v] of each head copied
// apart, simple GLA with the per-head constant decay (g_gamma = -slope, scale 1): a decode step in place in the
// pool's [H, D, D] state slots (ssm_state_indices, as device_conv_state.h's mixers; replayable), a prefill over
// the whole ragged batch in place in the same slots; the RMSNorm over
// all heads' features, times sigmoid(output_gate(h)), out_proj added into the stream it is handed (the runner's
// postnorm blocks hand it a zeroed one).
#include <memory>

#include "layers/lightning_attention_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_lightning(const LightningAttentionMixer& mixer, const DeviceLoad& load);

}  // namespace attnzoo
