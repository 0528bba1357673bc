#pragma once
// Mamba-2 (SSD, state-space duality): a scalar decay per head and B / C shared by the heads of a group.
//
//   dt'_t = clamp(softplus?(dt_t + dt_bias))            per head
//   h_t   = exp(A * dt'_t) h_{t-1} + dt'_t x_t B_t^T      h [P, N] per head (P = head dim, N = state size)
//   y_t   = h_t C_t + D x_t,   then y_t *= silu(z_t) when z is given
//
// Layouts (mamba_ssm's): x, z [B, T, H, P]; dt [B, T, H]; A [H]; B, C [B, T, G, N] with H a multiple of G
// (head h reads group h / (H / G)); D [H] or [H, P]; dt_bias [H]; states [Nseq, H, P, N] f32. Packed sequences
// use cu_seqlens with batch 1. y has x's shape; its dtype is the caller's choice (the Python API uses x's).
// Mamba-2 is simple GLA with g = A dt', k = B, q = C, v = dt' x; the chunked kernel uses that form.
#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

struct Mamba2Args {
  TensorView x, dt, A, B, C;
  TensorView D, z, dt_bias;  // optional: leave empty
  bool dt_softplus = false;
  bool dt_limit = false;  // clamp dt' to [dt_min, dt_max] (mamba_ssm applies its dt_limit only when given)
  float dt_min = 0.f, dt_max = INFINITY;
  const int32_t* cu_seqlens = nullptr;
  int64_t cu_seqlens_len = 0;
  TensorView initial_state;  // optional [Nseq, H, P, N] f32
  TensorView final_state;    // optional [Nseq, H, P, N] f32, written
  // What errors call the two states: a decode step's one in-place state goes through these checks as both.
  const char* initial_state_name = "initial_state";
  const char* final_state_name = "final_state";
  TensorView y;              // [B, T, H, P], written
  int64_t chunk_size = 64;   // chunk form only: 16, 32, 64 or 128
  // States in a pool (as Mamba2StepArgs' state_batch_indices; int32 [Nseq] in device memory, GPU tensors only):
  // initial_state and final_state are one [slots, H, P, N] f32 tensor with any row stride, sequence n starts
  // from and leaves its state in row state_batch_indices[n], and a negative index is a pad (neither its slot nor
  // its y rows are touched).
  const int32_t* state_batch_indices = nullptr;
};

// Prefill: chunked SSD (dense tile products inside chunks, states passed between chunks). Runs where the
// tensors live: the CPU, or a GPU in a CUDA build on tensor cores (cuda/mamba2_chunk_cuda.h; chunk_size <= 64
// there, and N or P > 128 take the recurrent kernel).
void mamba2_chunk_scan(const Mamba2Args& args);
// Token-by-token recurrence, O(1) state per step. Runs where the tensors live (all on x's device): the CPU, or
// a GPU in a CUDA build (cuda/mamba2_recurrent_cuda.h); the reference runs on the CPU only and refuses device
// tensors by name.
void mamba2_recurrent(const Mamba2Args& args);
// The plain recurrence in double precision (tests compare against it).
void mamba2_reference(const Mamba2Args& args);

// One decode step for a batch of sequences, state updated in place (mamba_ssm's selective_state_update for
// Mamba-2): state [Bn, H, P, N] f32; x, z [Bn, H, P]; dt [Bn, H]; A [H]; B, C [Bn, G, N]; D [H] or [H, P];
// dt_bias [H]; y [Bn, H, P]. Runs on the CPU or a GPU, as mamba2_recurrent.
struct Mamba2StepArgs {
  TensorView state, x, dt, A, B, C;
  TensorView D, z, dt_bias;
  bool dt_softplus = false;
  bool dt_limit = false;
  float dt_min = 0.f, dt_max = INFINITY;
  TensorView y;
  // States in a pool (mamba_ssm / vLLM's state_batch_indices; int32 [Bn] in device memory, GPU tensors only):
  // state is then [slots, H, P, N] with any row stride (the pool's slot stride; each row's [H, P, N] contiguous),
  // batch row b reads and updates row state_batch_indices[b] in place, and a negative index skips the row (neither
  // its state nor its y is touched: a padded batch row).
  const int32_t* state_batch_indices = nullptr;
};
void mamba2_state_update(const Mamba2StepArgs& args);
void mamba2_state_update_reference(const Mamba2StepArgs& args);

}  // namespace attnzoo
