#pragma once
// A validated Mamba-2 call, shared by the reference, recurrent and chunked paths: shapes resolved, the step
// sizes dt' precomputed (bias, softplus, limits) and the small per-head parameters widened to f32.
#include <vector>

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/mamba2/mamba2.h"

namespace attnzoo {

struct Mamba2Problem {
  int64_t batch = 0, T = 0, H = 0, P = 0, G = 0, N = 0;
  SequenceSpans seqs;
  std::vector<float> dt;  // [B*T, H] effective step dt'
  std::vector<float> A;   // [H]
  std::vector<float> D;   // [H*P] (a per-head D is broadcast) or empty
  const void* x = nullptr;
  const void* Bm = nullptr;
  const void* Cm = nullptr;
  const void* z = nullptr;
  DType x_dtype{}, b_dtype{}, c_dtype{}, z_dtype{};
  const float* h0 = nullptr;  // [Nseq, H, P, N]
  float* ht = nullptr;
  void* y = nullptr;
  DType y_dtype{};
  int64_t chunk_size = 64;
  int64_t heads_per_group() const { return H / G; }
};

Mamba2Problem make_mamba2_problem(const Mamba2Args& a);

}  // namespace attnzoo

namespace attnzoo {

// One decode step: a batch of Bn sequences, one token each, state [Bn, H, P, N] updated in place. Reuses
// Mamba2Problem with T = 1, one sequence per batch row, and h0 == ht == the state.
Mamba2Problem make_mamba2_step_problem(const Mamba2StepArgs& a);

}  // namespace attnzoo
