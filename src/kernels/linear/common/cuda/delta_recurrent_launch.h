#pragma once
// The CUDA recurrence's launch, decided on the host: the kernel's parameters and grid for a validated problem.
// Plain C++: delta_recurrent.cu uploads the sequence offsets and launches; the kernel emulator
// (testing/cuda_emulation) runs the same parameters through the same kernel code (delta_recurrent_kernel.cuh).
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/common/cuda/recurrent_split.h"
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo::cuda_delta {

using cuda_linear::Elem;
using cuda_linear::elem_of;
using cuda_linear::kCols;
using cuda_linear::kMaxK;
using cuda_linear::kMaxThreads;
using cuda_linear::kMaxWarps;

// The states' heads are the value heads (HV).
struct Params : cuda_linear::RecurrentSplitParams {
  const void *q, *k, *v, *g, *beta;  // beta may be null (1)
  void* o;
  Elem q_t, k_t, v_t, g_t, beta_t, o_t;
  int H, HV, K, V, group;      // group = HV / H
  float scale;
  bool l2norm;
};

struct RecurrentLaunch {
  bool empty = true;                  // nothing to run: no sequences, or no tokens and no state to write
  Params params{};                    // seq_offsets still null: the caller points it at its copy of `offsets`
  std::vector<int64_t> seq_offsets;   // N + 1 rows for packed batches; empty for padded ones (no upload)
  unsigned grid = 0, threads = 0;     // one-dimensional
};

// For a problem check_cuda_delta_recurrent accepts.
RecurrentLaunch plan_delta_recurrent(const DeltaProblem& p);

}  // namespace attnzoo::cuda_delta
