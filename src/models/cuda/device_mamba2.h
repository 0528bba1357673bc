#pragma once
// The Mamba-2 mixer (layers/mamba2_mixer.h) as a GPU block (device_blocks.h): in_proj (its muP multipliers, when
// set, folded into its rows at load, or scaling its output columns in place where its weights stay GGUF blocks),
// the causal conv over x B C, the SSD scan, the gated RMSNorm and out_proj added into the residual stream, f32
// activations. One conv and one scan over the whole ragged batch, in place in the pool's slots: the kernels read
// and write each sequence's conv tail and SSM state in its slot through Batch::state_slots (uploaded with the
// step's metadata; a fresh sequence's slot was zeroed by the pool, a prefix-cache hit's restored, so every
// sequence starts from its slot as on the CPU).
#include <memory>

#include "layers/mamba2_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

// `scales`: a parallel branch's multipliers, folded into in_proj (in) and out_proj (out); only where their weights
// are `foldable` (device_parallel_mixer.cc decides).
std::unique_ptr<DeviceMixer> make_device_mamba2(const Mamba2Mixer& mixer, const DeviceLoad& load,
                                                MixerScales scales = {});

}  // namespace attnzoo
