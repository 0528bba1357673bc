#pragma once
// A validated Mamba-2 call, shared by the reference, recurrent and chunked paths: shapes resolved, the step
// sizes dt' precomputed (bias, softplus, limits) and the small per-head parameters widened to f32. Device-neutral:
// for tensors on a GPU only shapes are read, and the device path applies the step transform itself.
#include <vector>

#include "core/tensor.h"

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/mamba2/mamba2.h"

namespace attnzoo {

struct Mamba2Problem {
  Device device{};  // where every tensor lives (make_mamba2_problem checks they agree)
  int64_t batch = 0, T = 0, H = 0, P = 0, G = 0, N = 0;
  SequenceSpans seqs;
  // Host problems only (the host cannot read device memory):
  std::vector<float> dt;  // [B*T, H] effective step dt'
  std::vector<float> A;   // [H]
  std::vector<float> D;   // [H*P] (a per-head D is broadcast) or empty
  // The same inputs as given, for the device path: dt [B*T, H] before the transform, A [H], D [H] or [H, P]
  // (empty: none), dt_bias [H] (empty: none).
  TensorView dt_in, A_in, D_in, dt_bias_in;
  bool dt_softplus = false, dt_limit = false;
  float dt_min = 0.f, dt_max = 0.f;
  const void* x = nullptr;
  const void* Bm = nullptr;
  const void* Cm = nullptr;
  const void* z = nullptr;
  DType x_dtype{}, b_dtype{}, c_dtype{}, z_dtype{};
  const float* h0 = nullptr;  // [Nseq, H, P, N], or the pool's rows with state_indices
  float* ht = nullptr;
  const int32_t* state_indices = nullptr;  // Mamba2StepArgs::state_batch_indices (device memory), or null: row n
  int64_t state_stride = 0;                // floats from one sequence's state row to the next (H P N when dense)
  void* y = nullptr;
  DType y_dtype{};
  int64_t chunk_size = 64;
  int64_t heads_per_group() const { return H / G; }
};

Mamba2Problem make_mamba2_problem(const Mamba2Args& a);

// ArgumentError naming the first tensor of `a` not in host memory, for the entries that run on the CPU only so
// far (the references).
void require_mamba2_host(const Mamba2Args& a, const char* entry);
void require_mamba2_host(const Mamba2StepArgs& a, const char* entry);

// Runs a validated recurrent problem whose tensors live on a GPU on the current stream of their device: the CUDA
// path's own checks, then the kernel. DeviceError in a build without CUDA.
void mamba2_recurrent_on_device(const Mamba2Problem& p);
// The chunked form of a validated problem on its GPU: the chunked tensor-core kernels, or the recurrent kernel
// for state or head rows wider than their tiles (N or P > 128). DeviceError without CUDA.
void mamba2_chunk_on_device(const Mamba2Problem& p);

}  // namespace attnzoo

namespace attnzoo {

// One decode step: a batch of Bn sequences, one token each, state [Bn, H, P, N] updated in place. Reuses
// Mamba2Problem with T = 1, one sequence per batch row, and h0 == ht == the state.
Mamba2Problem make_mamba2_step_problem(const Mamba2StepArgs& a);

}  // namespace attnzoo
