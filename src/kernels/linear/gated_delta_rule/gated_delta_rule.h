#pragma once
// Gated DeltaNet (Yang et al. 2024; Qwen3-Next): the delta rule with one scalar log decay g per value head and
// token, in fla's layout and conventions:
//   S_t = exp(g_t) S_{t-1} + beta_t k_t (v_t - exp(g_t) S_{t-1}^T k_t)^T,   o_t = S_t^T (scale q_t)
// q, k [B, T, H, K]; v [B, T, HV, V] (HV a multiple of H); g, beta [B, T, HV]; state [N, HV, K, V] f32.
// An absent g is the plain delta rule (see delta_rule/delta_rule.h), run by the same kernels. The chunked and
// recurrent forms run on the CPU, or on a GPU when every tensor lives there (common/cuda/: the chunked form on
// tensor cores, delta_chunk_cuda.h; the recurrence, delta_recurrent_cuda.h); the reference on the CPU only.
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo {

// Chunked prefill (WY representation, tile GEMMs inside chunks of args.chunk_size tokens). On the CPU, or on a GPU
// when every tensor lives there (common/cuda/delta_chunk_cuda.h, launched on current_stream(): tensor-core
// products on bf16 operands with the state in f32; K, V <= 128 and chunk_size 16, 32 or 64 there).
void chunk_gated_delta_rule(const DeltaArgs& args);
// Token-by-token recurrence (decode; any length). On the CPU, or on a GPU when every tensor lives there
// (common/cuda/, launched on current_stream()).
void recurrent_gated_delta_rule(const DeltaArgs& args);
// The plain recurrence with double accumulation (tests). CPU tensors only.
void gated_delta_rule_reference(const DeltaArgs& args);

}  // namespace attnzoo
