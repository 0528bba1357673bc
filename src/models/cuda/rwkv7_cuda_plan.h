#pragma once
// What the GPU runner of RWKV-7 (rwkv7_cuda_runner.h) does not cover, refused on the host and by name before any
// upload. Plain C++: tested everywhere (models/rwkv7_cuda_plan_test.cc).
#include "models/rwkv7_model.h"

namespace attnzoo {

// ArgumentError "device: <what> (<architecture>, <where>) runs on the CPU only so far" for: a head_dim over 256
// (the CUDA recurrence keeps a head's state rows in one thread block's registers), GGUF blocks that no CUDA kernel
// reads nor the load expands (quant_supported). Everything else goes up: dense weights as bf16 / f16, GGUF blocks
// as device_weights.h keeps them. The pool's KV dtype does not apply (RWKV-7 keeps no KV cache: its slots are f32).
void check_rwkv7_runs_on_cuda(const Rwkv7Model& model);

}  // namespace attnzoo
