#pragma once
// The CUDA RWKV-7 recurrence's launch, decided on the host: the kernel's parameters and grid for a validated
// problem. Plain C++: rwkv7_recurrent.cu uploads the sequence offsets and launches; the kernel emulator
// (testing/cuda_emulation) runs the same parameters through the same kernel code (rwkv7_recurrent_kernel.cuh).
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/common/cuda/recurrent_split.h"
#include "kernels/linear/rwkv7/problem.h"

namespace attnzoo::cuda_rwkv7 {

using cuda_linear::Elem;
using cuda_linear::elem_of;
using cuda_linear::kCols;
using cuda_linear::kMaxK;
using cuda_linear::kMaxThreads;
using cuda_linear::kMaxWarps;

constexpr int kStageArrays = 12;  // shared floats per thread: r, exp(w), k, a, b twice over, the sa and o shares

// The kernel's dynamic shared memory for a block of `threads` (its units' K rounded up to whole warps).
constexpr unsigned stage_bytes(unsigned threads) { return kStageArrays * threads * unsigned(sizeof(float)); }

struct Params : cuda_linear::RecurrentSplitParams {
  const void *r, *w, *k, *v, *a, *b;
  void* o;
  Elem r_t, w_t, k_t, v_t, a_t, b_t, o_t;
  int H, K, V;
  float scale;
};

struct RecurrentLaunch {
  bool empty = true;                 // nothing to run: no sequences, or no tokens and no state to write
  Params params{};                   // seq_offsets still null: the caller points it at its copy of `seq_offsets`
  std::vector<int64_t> seq_offsets;  // N + 1 rows for packed batches; empty for padded ones (no upload)
  unsigned grid = 0, threads = 0;    // one-dimensional
  unsigned smem_bytes = 0;           // stage_bytes(threads), dynamic
};

// For a problem check_cuda_rwkv7_recurrent accepts.
RecurrentLaunch plan_rwkv7_recurrent(const Rwkv7Problem& p);

}  // namespace attnzoo::cuda_rwkv7
