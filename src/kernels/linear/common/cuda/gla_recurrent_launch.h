#pragma once
// The CUDA gated linear recurrence's launch, decided on the host: the kernel's parameters, grid and the host
// metadata to upload for a validated problem. Plain C++: gla_recurrent.cu uploads and launches; the kernel
// emulator (testing/cuda_emulation) runs the same parameters through the same kernel code
// (gla_recurrent_kernel.cuh).
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/common/cuda/recurrent_split.h"
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo::cuda_gla {

using cuda_linear::Elem;
using cuda_linear::elem_of;
using cuda_linear::kCols;
using cuda_linear::kMaxK;
using cuda_linear::kMaxThreads;
using cuda_linear::kMaxWarps;

// The states' heads are the value heads (HV).
struct Params : cuda_linear::RecurrentSplitParams {
  const void *q, *k, *v, *g;  // g: null without a data-dependent gate
  void* o;
  Elem q_t, k_t, v_t, g_t, o_t;
  const float* g_gamma;        // [HV] constant log decay added to a scalar gate; null: none
  const float* initial_z;      // [N, 1, H, K] (normalize); null: zeros
  float* final_z;              // [N, 1, H, K] (normalize); null: not written
  int H, HV, K, V, group;      // group = HV / H
  float scale;
  FeatureMap feature_map;
  bool normalize;
};

struct RecurrentLaunch {
  bool empty = true;                 // nothing to run: no sequences, or no tokens and no state to write
  GateKind gate = GateKind::none;    // the kernel to launch
  // seq_offsets still null, and g_gamma still the host's when `gamma` is not empty: the caller points them at
  // its device copies.
  Params params{};
  std::vector<int64_t> seq_offsets;  // N + 1 rows for packed batches; empty for padded ones (no upload)
  std::vector<float> gamma;          // a host g_gamma's HV values (retention builds its decays per call)
  unsigned grid = 0, threads = 0;    // one-dimensional
};

// For a problem check_cuda_gla_recurrent accepts.
RecurrentLaunch plan_gla_recurrent(const GlaProblem& p);

}  // namespace attnzoo::cuda_gla
