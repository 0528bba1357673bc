#pragma once
// Mamba (S6): the selective scan of mamba_ssm's selective_scan_fn, with a state of N values per channel:
//
//   dt_t = softplus?(delta_t + delta_bias)                             per channel d
//   h_t[d, n] = exp(dt_t[d] A[d, n]) h_{t-1}[d, n] + dt_t[d] B_t[n] u_t[d]
//   out_t[d] = sum_n h_t[d, n] C_t[n] + D[d] u_t[d],   then out *= silu(z) when z is given
//
// Layouts (mamba_ssm's, channel-major): u, delta, z, out [Bt, D, L]; A [D, N]; B, C [Bt, N, L] or [Bt, G, N, L]
// (channel d reads group d / (D / G)); D, delta_bias [D]; states [Nseq, D, N] f32. Packed sequences put
// cu_seqlens offsets along L with Bt = 1. A is per (channel, state), so there is no chunked matrix form worth
// having (see README.md): the scan itself is the fast path.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

struct SelectiveScanArgs {
  TensorView u, delta, A, B, C;
  TensorView D, z, delta_bias;  // optional
  bool delta_softplus = false;
  const int32_t* cu_seqlens = nullptr;
  int64_t cu_seqlens_len = 0;
  TensorView initial_state;  // optional [Nseq, D, N] f32
  TensorView final_state;    // optional [Nseq, D, N] f32, written
  // What errors call the two states: a decode step's one in-place state goes through these checks as both.
  const char* initial_state_name = "initial_state";
  const char* final_state_name = "final_state";
  TensorView out;            // [Bt, D, L], written
  // States in a pool (as SelectiveStateUpdateArgs' state_batch_indices; int32 [Nseq] in device memory, GPU
  // tensors only): initial_state and final_state are one [slots, D, N] f32 tensor with any row stride, sequence n
  // starts from and leaves its state in row state_batch_indices[n], and a negative index is a pad (neither its
  // slot nor its out columns are touched).
  const int32_t* state_batch_indices = nullptr;
};

// Runs where the tensors live (all on u's device): the CPU, or a GPU in a CUDA build (cuda/selective_scan_cuda.h).
void selective_scan(const SelectiveScanArgs& args);
// The plain recurrence in double precision; the CPU only so far (device tensors are refused by name).
void selective_scan_reference(const SelectiveScanArgs& args);

// One decode step, state updated in place (mamba_ssm's selective_state_update): state [Bn, D, N] f32;
// x, dt, z, y [Bn, D]; A [D, N]; B, C [Bn, N] or [Bn, G, N]; D, dt_bias [D]. Runs on the CPU or a GPU, as
// selective_scan.
struct SelectiveStateUpdateArgs {
  TensorView state, x, dt, A, B, C;
  TensorView D, z, dt_bias;
  bool dt_softplus = false;
  TensorView y;
  // States in a pool (mamba_ssm / vLLM's state_batch_indices; int32 [Bn] in device memory, GPU tensors only):
  // state is then [slots, D, N] with any row stride (the pool's slot stride; each row's [D, N] contiguous), batch
  // row b reads and updates row state_batch_indices[b] in place, and a negative index skips the row (neither its
  // state nor its y is touched: a padded batch row).
  const int32_t* state_batch_indices = nullptr;
};
void selective_state_update(const SelectiveStateUpdateArgs& args);
void selective_state_update_reference(const SelectiveStateUpdateArgs& args);

}  // namespace attnzoo
