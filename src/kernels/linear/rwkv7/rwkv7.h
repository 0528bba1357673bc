#pragma once
// RWKV-7 ("Goose"): the generalized delta rule with a diagonal-plus-low-rank transition, in fla's convention
// (state S [K, V] per head; fla.ops.rwkv7 / generalized_delta_rule.dplr):
//
//   S_t = diag(exp(w_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T,     o_t = S_t^T (scale * r_t)
//
// w is the log decay (natural log, <= 0 in RWKV-7 models); a and b are given as they are (RWKV-7 blocks pass
// a = -kk and b = kk * iclr). Layouts: r, w, k, a, b [B, T, H, K]; v, o [B, T, H, V]; states [Nseq, H, K, V]
// f32. Packed sequences: cu_seqlens with B = 1.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

struct Rwkv7Args {
  TensorView r, w, k, v, a, b;
  float scale = 1.f;
  TensorView initial_state;  // optional [Nseq, H, K, V] f32
  TensorView final_state;    // optional [Nseq, H, K, V] f32, written (may alias initial_state)
  TensorView o;              // [B, T, H, V]
  const int32_t* cu_seqlens = nullptr;
  int64_t cu_seqlens_len = 0;
  // States addressed in a pool (fla / vLLM's ssm_state_indices, as DeltaArgs): int32 [Nseq] on the states'
  // device, sequence n's row of initial_state / final_state, which are then [slots, H, K, V] with any row stride
  // (the pool's slot stride; the rest contiguous) and must be the same tensor. A negative index skips the
  // sequence: neither its state nor its o is touched (a padded batch row). The recurrent and chunked entries on a
  // device only.
  const int32_t* ssm_state_indices = nullptr;
};

// Token by token, O(1) state per step (prefill and decode). Runs where the tensors live (all on r's device): the
// CPU, or a GPU in a CUDA build (cuda/rwkv7_recurrent_cuda.h); a decode step passes T = 1 and the pool's state
// slots as both initial_state and final_state.
void recurrent_rwkv7(const Rwkv7Args& args);
// Chunkwise-parallel prefill (fla's chunk_dplr_delta_rule): the same results as recurrent_rwkv7, with the work of
// each chunk of chunk_size tokens (16, 32, 64 or 128; otherwise ArgumentError naming chunk_size) done as dense
// products. Stable at any decay w <= 0. Runs where the tensors live: the CPU, or a GPU in a CUDA build
// (cuda/rwkv7_chunk_cuda.h: tensor cores, bf16 operands; K, V <= 128, chunk_size <= 64).
void chunk_rwkv7(const Rwkv7Args& args, int64_t chunk_size = 64);
// The double-precision definition; the CPU only (device tensors are refused by name).
void rwkv7_reference(const Rwkv7Args& args);

}  // namespace attnzoo
