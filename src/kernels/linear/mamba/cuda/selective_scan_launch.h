#pragma once
// The CUDA selective scan's launch, decided on the host: the kernel's parameters, grid and the packed sequences'
// offsets to upload for a validated problem. Plain C++: selective_scan.cu uploads and launches; the kernel
// emulator (testing/cuda_emulation) runs the same parameters through the same kernel code
// (selective_scan_kernel.cuh).
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/mamba/problem.h"

namespace attnzoo::cuda_mamba {

using cuda_linear::Elem;
using cuda_linear::elem_of;

constexpr int kLanesPerChannel = 16;
constexpr int kThreads = 128;
constexpr int kChannels = kThreads / kLanesPerChannel;  // 8 per CTA
constexpr int kMaxN = 256;

struct Params {
  const void *u, *delta, *A, *B, *C;
  const void *skip, *z, *delta_bias;  // may be null; skip is D [D]
  void* out;
  Elem u_t, delta_t, A_t, B_t, C_t, skip_t, z_t, delta_bias_t, out_t;
  const float* initial_state;  // [Nseq, D, N]; null: zeros
  float* final_state;          // [Nseq, D, N]; null: not written; may be initial_state
  const int32_t* state_indices;  // sequence s's state row (negative: skip the sequence); null: row s
  int64_t state_stride;          // floats between state rows
  // Packed sequences: Nseq + 1 positions along L of batch row 0; null: sequence s is batch row s, positions [0, L).
  const int64_t* seq_offsets;
  int64_t L;
  int D, N, G, channels_per_group;
  int channel_blocks;  // ceil(D / kChannels)
  bool softplus;
};

struct ScanLaunch {
  bool empty = true;                 // nothing to run: no sequences, or no tokens and no state to write
  int per_lane = 0;                  // the kernel to launch: 1, 2, 4, 8 or 16 state entries per lane (N <= 16 of them)
  Params params{};                   // seq_offsets still null: the caller points it at its device copy
  std::vector<int64_t> seq_offsets;  // Nseq + 1 positions for packed batches; empty for batch rows (no upload)
  unsigned grid = 0, threads = 0;    // one-dimensional
};

// For a problem check_cuda_selective_scan accepts.
ScanLaunch plan_selective_scan(const SelectiveScanProblem& p);

}  // namespace attnzoo::cuda_mamba
