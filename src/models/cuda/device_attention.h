#pragma once
// Softmax attention as a GPU block (device_blocks.h): q / k / v projections (optional biases), Qwen3's per-head
// q / k RMSNorm, RoPE or none (NoPE layers), the new K/V written into the pool's paged device memory, the CUDA
// prefill for fresh sequences and the paged decode for cached ones (the step's AttentionCalls), then the output
// projection added into the residual stream. q, k, v and the attention output are the cache's 16-bit dtype.
#include <memory>

#include "layers/attention_layer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

// `scales`: a parallel branch's multipliers, folded into q / k / v (in) and o_proj (out); only where their weights
// are `foldable` (device_parallel_mixer.cc decides).
std::unique_ptr<DeviceMixer> make_device_attention(const AttentionLayer& attn, const DeviceLoad& load,
                                                   MixerScales scales = {});

}  // namespace attnzoo
