#pragma once
// The CUDA Mamba-2 recurrence's launch, decided on the host: the kernel's parameters, grid and the sequences'
// offsets to upload for a validated problem. Plain C++: mamba2_recurrent.cu uploads and launches; the kernel
// emulator (testing/cuda_emulation) runs the same parameters through the same kernel code
// (mamba2_recurrent_kernel.cuh).
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/mamba2/problem.h"

namespace attnzoo::cuda_mamba2 {

using cuda_linear::Elem;
using cuda_linear::elem_of;

constexpr int kRowsPerWarp = 4;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;  // 16: a 64-row head is 4 CTAs, enough of them at batch 1
constexpr int kMaxN = 256;

struct Params {
  const void *x, *dt, *A, *B, *C;
  const void *D, *z, *dt_bias;  // may be null
  void* y;
  Elem x_t, dt_t, A_t, B_t, C_t, D_t, z_t, dt_bias_t, y_t;
  const float* initial_state;  // [Nseq, H, P, N]; null: zeros
  float* final_state;          // [Nseq, H, P, N]; null: not written; may be initial_state
  const int32_t* state_indices;  // sequence n's state row (negative: skip the sequence); null: row n
  int64_t state_stride;          // floats between state rows
  const int64_t* seq_offsets;  // Nseq + 1 token rows of packed sequences; null: sequence n is rows [n T, n T + T)
  int64_t T;
  int H, P, G, N, heads_per_group;
  int slices;  // ceil(P / kRowsPerCta)
  bool D_per_channel, dt_softplus, dt_limit;
  float dt_min, dt_max;
};

struct RecurrentLaunch {
  bool empty = true;                 // nothing to run: no sequences, or no tokens and no state to write
  int cols_per_lane = 0;             // the kernel to launch: 2, 4 or 8 state columns per lane (N <= 32 of them)
  Params params{};                   // seq_offsets still null: the caller points it at its device copy
  std::vector<int64_t> seq_offsets;  // Nseq + 1 rows for packed batches; empty for padded ones (no upload)
  unsigned grid = 0, threads = 0;    // one-dimensional
};

// For a problem check_cuda_mamba2_recurrent accepts.
RecurrentLaunch plan_mamba2_recurrent(const Mamba2Problem& p);

}  // namespace attnzoo::cuda_mamba2
