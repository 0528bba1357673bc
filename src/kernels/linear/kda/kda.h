#pragma once
// Kimi Delta Attention (Kimi Linear, 2025): the gated delta rule with one log decay per key channel, in fla's
// layout and conventions:
//   S_t = diag(exp(g_t)) S_{t-1} + beta_t k_t (v_t - (diag(exp(g_t)) S_{t-1})^T k_t)^T,   o_t = S_t^T (scale q_t)
// q, k [B, T, H, K]; v [B, T, HV, V] (HV a multiple of H); g [B, T, HV, K]; beta [B, T, HV];
// state [N, HV, K, V] f32.
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo {

// Chunked prefill (WY representation; per-channel decays handled in 16-token sub-chunks, see
// common/delta_chunk-inl.h). On the CPU, or on a GPU when every tensor lives there (common/cuda/
// delta_chunk_cuda.h, launched on current_stream(): tensor-core products on bf16 operands with the state in f32;
// K, V <= 128 and chunk_size 16, 32 or 64 there).
void chunk_kda(const DeltaArgs& args);
// Token-by-token recurrence (decode; any length). On the CPU, or on a GPU when every tensor lives there
// (common/cuda/, launched on current_stream()).
void recurrent_kda(const DeltaArgs& args);
// The plain recurrence with double accumulation (tests). CPU tensors only.
void kda_reference(const DeltaArgs& args);

}  // namespace attnzoo
