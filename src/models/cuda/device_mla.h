#pragma once
// Multi-head latent attention (DeepSeek-V2 / V3, GLM-4.7-style MLA, Kimi Linear's MLA layers) as a GPU block
// (device_blocks.h), the twin of layers/mla_mixer.h: q through q_a_proj → q_a_layernorm → q_b_proj (or a plain
// q_proj), kv_a_proj_with_mqa into the latent row [c_kv ; k_pe], kv_a_layernorm on c_kv, RoPE on q_pe and k_pe (none
// on NoPE layers), the latent rows written into the pool's paged latent cache, then the attention split by
// mla_rows_plan.h's plan_mla_step: decode rows through the absorbed CUDA MLA decode, one row per new token (calls of
// at most mla_rows_per_call rows); prefill sequences of more than kMaxDecodeQueries new tokens (fresh, chunked or
// after a prefix-cache hit) through their whole context's latents expanded into padded K / V by kv_b_proj and the
// CUDA softmax prefill; then o_proj added into the residual stream. Both paths are planned once per step by the
// first MLA layer (prepare: the absorbed calls' decode plans and the expanded calls' row indices travel in the
// step's one copy); every layer launches. What those launches bake in joins the step graph's signature
// (mla_step_signature.h), so decode-only steps replay from CUDA graphs (step_graphs.h) as attention's do. Activations and the latent are the cache's 16-bit dtype; kv_b_proj goes up
// as the CPU holds it (bf16 / f16 / f32), read by the decode kernel directly; an f32 one keeps every row absorbed
// (the expansion's GEMM takes bf16 / f16 weights).
#include <memory>

#include "layers/mla_mixer.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceMixer> make_device_mla(const MlaMixer& mla, const DeviceLoad& load);

}  // namespace attnzoo
