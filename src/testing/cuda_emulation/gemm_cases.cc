// Our GEMM (layers/cuda/gemm_kernel.cuh, launched as gemm_plan.h plans it) under the CTA emulator against the
// double reference (testing/gemm_reference.h): both tiles, M / N / K off every tile edge (K not a multiple of 8
// included: the element-wise staging), padded and odd row strides, every dtype of x, W, bias and y, bias and
// accumulation into y. Bytes between and after y's rows start as NaN and must stay so; a wrong fragment, a lost
// K step or an unmasked edge puts elements far outside the bounds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/gemm_kernel.cuh"
#include "layers/cuda/gemm_plan.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"
#include "testing/gemm_reference.h"

namespace attnzoo {
namespace {
using namespace cuda_gemm;
using cuda_emulation::StridedOperand;

struct Case {
  int64_t M, N, K;
  DType x = DType::bf16, w = DType::bf16, y = DType::f32;
  int64_t x_pad = 0, w_pad = 0, y_pad = 0;  // elements after each row
  bool bias = false, accumulate = false;
  DType bias_dtype = DType::f32;
  TileKind tile = TileKind::small;

  std::string label() const {
    return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + " x=" + dtype_name(x) +
           " w=" + dtype_name(w) + " y=" + dtype_name(y) + " pads " + std::to_string(x_pad) + "/" +
           std::to_string(w_pad) + "/" + std::to_string(y_pad) + (bias ? " bias " + std::string(dtype_name(bias_dtype)) : "") +
           (accumulate ? " accumulate" : "") + (tile == TileKind::large ? " large" : " small");
  }
};

template <class Tile, class W>
void run_blocks(const GemmLaunch& l) {
  cuda_emulation::launch(dim3(l.grid_m, l.grid_n), Tile::kThreads, Tile::kSmemBytes,
                         [&](unsigned char* smem) { gemm_block<Tile, W>(l.params, smem); });
}

void check(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.label());
  StridedOperand x(c.x, {c.M, c.K}, seed, {c.K + c.x_pad, 1});
  StridedOperand w(c.w, {c.N, c.K}, seed + 1, {c.K + c.w_pad, 1}, 0.5f);
  StridedOperand bias(c.bias_dtype, {c.N}, seed + 2);
  StridedOperand y(c.y, {c.M, c.N}, seed + 3, {c.N + c.y_pad, 1});
  if (!c.accumulate) {  // a fresh output: NaN everywhere, so any element the kernel skips shows
    std::fill(y.host.begin(), y.host.end(), uint8_t(0xFF));
    y.upload();
  }
  const testing::GemmExpected want =
      testing::gemm_expected(x.view, w.view, c.bias ? &bias.view : nullptr, c.accumulate ? &y.view : nullptr, c.y);

  auto on_gpu = [](TensorView t) {
    t.device = Device::cuda();
    return t;
  };
  const TensorView xd = on_gpu(x.device_view()), wd = on_gpu(w.device_view()), bd = on_gpu(bias.device_view()),
                   yd = on_gpu(y.device_view());
  GemmOptions opts;
  opts.accumulate = c.accumulate;
  const GemmProblem p = make_gemm_problem(xd, wd, c.bias ? &bd : nullptr, yd, opts);
  const GemmLaunch l = plan_gemm(p, 132, &c.tile);
  cuda_emulation::seed_schedule(seed);
  const bool large = c.tile == TileKind::large, bf16 = c.w == DType::bf16;
  if (large) bf16 ? run_blocks<LargeTile, __nv_bfloat16>(l) : run_blocks<LargeTile, __half>(l);
  else bf16 ? run_blocks<SmallTile, __nv_bfloat16>(l) : run_blocks<SmallTile, __half>(l);

  y.download();
  int64_t first = 0;
  const int64_t bad = testing::gemm_mismatches(y.view, want, &first);
  EXPECT_EQ(bad, 0) << "first at row " << first / c.N << " col " << first % c.N << ": got "
                    << load_as_f32(y.view.data, c.y, first / c.N * y.view.strides[0] + first % c.N) << ", want "
                    << want.value[size_t(first)] << " +- " << want.bound[size_t(first)];
  EXPECT_TRUE(y.outside_untouched());
}

Case shape(int64_t M, int64_t N, int64_t K, TileKind tile = TileKind::small) {
  Case c;
  c.M = M, c.N = N, c.K = K, c.tile = tile;
  return c;
}

// M, N and K off every edge of both tiles: one row, one column, partial blocks, K of one partial step and of
// several with a partial last one; the prologue's empty groups (K below kStages - 1 steps) included.
TEST(EmulatedGemm, MatchesOddShapesOnBothTiles) {
  uint64_t seed = 1;
  for (TileKind tile : {TileKind::small, TileKind::large})
    for (const auto& [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 8, 16}, {37, 70, 40}, {130, 129, 96}, {65, 1, 200}, {3, 136, 8}})
      check(shape(M, N, K, tile), seed++);
}

// Every dtype of x against both W dtypes (x differing from W takes the converting stage), each y dtype.
TEST(EmulatedGemm, MatchesEveryDtypeCombination) {
  uint64_t seed = 100;
  for (DType w : {DType::bf16, DType::f16})
    for (DType x : {DType::f32, DType::bf16, DType::f16})
      for (DType y : {DType::f32, DType::bf16, DType::f16}) {
        Case c = shape(45, 72, 64);
        c.x = x, c.w = w, c.y = y;
        check(c, seed++);
      }
}

// Row strides of every kind: padded by whole 16-byte pieces (still cp.async), by odd element counts (element-wise
// staging, single stores), and K not a multiple of 8 (element-wise for both operands).
TEST(EmulatedGemm, MatchesPaddedAndOddStrides) {
  uint64_t seed = 200;
  for (int64_t pad : {8, 3})
    for (DType y : {DType::f32, DType::bf16}) {
      Case c = shape(70, 90, 72);
      c.x_pad = pad, c.w_pad = pad, c.y_pad = pad, c.y = y;
      check(c, seed++);
    }
  // f32 activations: rows padded by a 16-byte multiple (two 16-byte loads a piece), then by an odd count.
  for (int64_t pad : {4, 3}) {
    Case c = shape(70, 90, 72);
    c.x = DType::f32, c.x_pad = pad;
    check(c, seed++);
  }
    Case odd_k = shape(33, 40, 45);
  check(odd_k, seed++);
  odd_k.x = DType::f32, odd_k.w = DType::f16;
  check(odd_k, seed++);
}

// Bias of each dtype, accumulation into y (the residual stream) with and without it, on both tiles.
TEST(EmulatedGemm, AddsBiasAndAccumulates) {
  uint64_t seed = 300;
  for (TileKind tile : {TileKind::small, TileKind::large})
    for (DType bias : {DType::f32, DType::bf16, DType::f16})
      for (bool accumulate : {false, true}) {
        Case c = shape(50, 100, 56, tile);
        c.bias = true, c.bias_dtype = bias, c.accumulate = accumulate;
        c.y = accumulate ? DType::bf16 : DType::f32;
        check(c, seed++);
      }
  Case plain_accumulate = shape(20, 24, 32);
  plain_accumulate.accumulate = true;
  check(plain_accumulate, seed++);
}

// The plan: large tiles once they fill the GPU, small ones before; operands' staging chosen from dtype and
// alignment.
TEST(EmulatedGemm, PlansTilesAndStaging) {
  alignas(16) static unsigned char mem[64];
  GemmProblem p;
  p.M = 4096, p.N = 4096, p.K = 4096, p.ldx = p.ldw = 4096, p.ldy = 4096;
  p.x = p.w = p.y = mem;
  EXPECT_EQ(plan_gemm(p, 132).tile, TileKind::large);
  p.M = 256;  // 2 x 32 large blocks on 132 SMs
  EXPECT_EQ(plan_gemm(p, 132).tile, TileKind::small);
  GemmLaunch l = plan_gemm(p, 132);
  EXPECT_EQ(l.grid_m, 4u);
  EXPECT_EQ(l.grid_n, 64u);
  EXPECT_TRUE(l.params.x_async && l.params.w_async && l.params.y_pairs);
  EXPECT_FALSE(l.params.x_f32_pieces);
  p.x_dtype = DType::f32;
  EXPECT_FALSE(plan_gemm(p, 132).params.x_async);
  EXPECT_TRUE(plan_gemm(p, 132).params.x_f32_pieces);
  p.ldx = 4098;
  EXPECT_FALSE(plan_gemm(p, 132).params.x_f32_pieces);
  p.ldx = 4096;
  p.x_dtype = DType::bf16, p.ldw = 4100;
  EXPECT_FALSE(plan_gemm(p, 132).params.w_async);
  p.ldw = 4096, p.K = 4092;
  l = plan_gemm(p, 132);
  EXPECT_FALSE(l.params.x_async || l.params.w_async);
}

}  // namespace
}  // namespace attnzoo
