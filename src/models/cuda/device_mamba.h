#pragma once
// The Mamba-1 mixer (layers/mamba_mixer.h: Mamba, Falcon-Mamba, Jamba's mamba layers) as a GPU block
// (device_blocks.h): in_proj, the causal conv (SiLU) over x, x_proj with Falcon-Mamba's / Jamba's RMSNorms of
// dt_low, B and C, dt_proj, the selective scan gated by silu(z), and out_proj added into the residual stream, f32
// activations. As device_mamba2.*, each step runs one conv and one scan over the whole ragged batch in place in
// the pool's slots (DeviceConvStates). A decode step (every sequence one token) takes selective_state_update on the token-major rows; any other
// batch the packed selective scan, whose channel-major [inner, T] layout the activations are transposed into
// (layers/cuda/transpose_cuda.h) and its output back out of.
#include <memory>

#include "layers/mamba_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_mamba(const MambaMixer& mixer, const DeviceLoad& load);

}  // namespace attnzoo
