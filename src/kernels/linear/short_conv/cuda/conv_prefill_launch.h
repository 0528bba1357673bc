#pragma once
// The CUDA short-convolution prefill's launch, decided on the host: the token tiles of every sequence, the
// kernels' parameters and grids for a validated problem. Plain C++: conv_prefill.cu uploads the tiles and
// launches; the kernel emulator (testing/cuda_emulation) runs the same parameters through the same kernel code
// (conv_prefill_kernel.cuh).
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/short_conv/conv_problem.h"

namespace attnzoo::cuda_conv_prefill {

using cuda_linear::Elem;
using cuda_linear::elem_of;

constexpr int kThreads = 128;     // channels per thread block, one each
constexpr int kTileTokens = 64;   // tokens a thread walks with its window in registers

// The window's register width: the smallest of 4, 8 and 16 that holds W taps (make_conv_problem caps W at 16).
inline int window_width(int64_t W) { return W <= 4 ? 4 : W <= 8 ? 8 : 16; }

struct Params {
  const void *x, *weight, *bias;  // bias may be null
  void* y;
  Elem x_t, weight_t, bias_t, y_t;
  const float* initial_state;  // [N, D, S]; null: zeros before each sequence
  float* final_state;          // [N, D, S]; null: not written; may be initial_state
  // Pool states (conv_state_indices): sequence n's [D, S] state is row state_indices[n], state_stride floats
  // apart; a negative row is a pad whose threads touch nothing. Null: row n of the dense states (stride D S).
  const int32_t* state_indices;
  int64_t state_stride;
  // N + 1 token rows (sequence n is rows [seq_offsets[n], seq_offsets[n + 1])), then per tile of up to
  // kTileTokens tokens of one sequence: (sequence, first row); see tiles_of.
  const int64_t* seq_offsets;
  int64_t N, D;
  int W, S;
  int channel_blocks;          // ceil(D / kThreads)
  bool silu;
};

struct PrefillLaunch {
  bool empty = true;  // nothing to run: no sequences, or no tokens and no final state
  Params params{};  // seq_offsets still null: the caller uploads `metadata` and points seq_offsets at its copy
  std::vector<int64_t> metadata;     // the N + 1 sequence offsets, then two entries per tile
  int window = 4;                    // window_width(W): the kernels' template argument
  unsigned output_grid = 0;          // tiles x channel blocks; 0: no output launch
  unsigned state_grid = 0;           // ceil(N D / kThreads); 0: no final state to write
  unsigned threads = kThreads;
};

// Where the tiles start in the uploaded metadata (constexpr: the kernels call it too, under --expt-relaxed-constexpr).
constexpr const int64_t* tiles_of(const Params& p) { return p.seq_offsets + p.N + 1; }

// For a problem check_cuda_conv_prefill accepts.
PrefillLaunch plan_conv_prefill(const ConvProblem& p);

}  // namespace attnzoo::cuda_conv_prefill
