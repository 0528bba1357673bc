#pragma once
// Our GEMM's launch, decided on the host (plain C++, so the emulator's cases and gemm.cu fill it alike): the
// kernel's parameters, the two tile shapes and which one a problem gets.
#include <cstddef>
#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.h"
#include "layers/cuda/gemm_cuda.h"

namespace attnzoo::cuda_gemm {

using cuda_linear::Elem;

struct GemmParams {
  const void* x;
  const void* w;
  const void* bias;  // null: none
  void* y;
  int64_t ldx, ldw, ldy;  // elements
  int M, N, K;
  Elem x_type, bias_type, y_type;  // W's dtype is the kernel's template argument
  // 16-byte cp.async staging: the operand is in W's dtype, its base and row stride 16-byte aligned and K a
  // multiple of 8, so a row's 8-element pieces are all inside or all outside it. Otherwise elements are loaded
  // one by one and converted (padded strides, f32 activations).
  bool x_async, w_async;
  // x f32 with 16-byte aligned rows and K a multiple of 8: two 16-byte loads per piece, converted in registers.
  bool x_f32_pieces;
  bool y_pairs;  // y's base and row stride allow paired stores of two neighbouring columns
  bool accumulate;
};

// A CTA computes a BM x BN block of y with WarpsM x WarpsN warps, each a (BM / WarpsM) x (BN / WarpsN) block as
// m16n8k16 tiles, stepping K by 32 through a ring of kStages shared-memory stages (cp.async prefetches
// kStages - 1 steps ahead). Rows of a stage are padded from 32 to 40 elements (80 bytes): the eight rows an
// ldmatrix reads then start in eight different 16-byte bank groups.
template <int BM_, int BN_, int WarpsM_, int WarpsN_>
struct GemmTile {
  static constexpr int BM = BM_, BN = BN_, kWarpsM = WarpsM_, kWarpsN = WarpsN_;
  static constexpr int BK = 32, kStages = 3, kPitch = BK + 8;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr size_t kStageElems = size_t(BM + BN) * kPitch;
  static constexpr size_t kSmemBytes = kStages * kStageElems * 2;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp's block is whole 16 x 16 tiles");
};
// 128 x 128 with 8 warps of 64 x 32 (60 KB of stages) for prefill-sized M; 64 x 64 with 4 warps of 32 x 32
// (30 KB) when the large tiles would not fill the GPU once.
using LargeTile = GemmTile<128, 128, 2, 4>;
using SmallTile = GemmTile<64, 64, 2, 2>;

enum class TileKind : uint8_t { large, small };

struct GemmLaunch {
  GemmParams params;
  TileKind tile;
  unsigned grid_m, grid_n;  // blockIdx.x walks M (neighbouring CTAs share a W panel), blockIdx.y walks N
  int threads;
  size_t smem;
};

// The launch of `p` on a GPU of `sm_count` multiprocessors; `force` (tests) picks the tile.
GemmLaunch plan_gemm(const GemmProblem& p, int sm_count, const TileKind* force = nullptr);

}  // namespace attnzoo::cuda_gemm
