// The CUDA RWKV-7 recurrence: what it refuses (checked on the host, no GPU needed), and, on a GPU, its outputs and
// final states against the double-precision reference run on the same host data, through the public entry
// (recurrent_rwkv7), so the device branch and the launch are both exercised. Compiled by g++ in every CUDA build:
// no CUDA headers here.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_gpu_run.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::Rwkv7Case;
using testing::Rwkv7Inputs;
using testing::rwkv7_case;

TEST(CudaRwkv7Recurrent, RefusesWhatItDoesNotDo) {
  auto check = [](const Rwkv7Case& c, auto&& edit) {
    testing::check_rwkv7_problem(c, edit, check_cuda_rwkv7_recurrent);
  };
  auto nothing = [](Rwkv7Problem&) {};
  EXPECT_NO_THROW(check(rwkv7_case(1, 1, 1, 256, 8), nothing));
  testing::expect_error<ArgumentError>([&] { check(rwkv7_case(1, 1, 1, 257, 8), nothing); }, "r: K=257 exceeds 256");
  Rwkv7Case bf16 = rwkv7_case(1, 2, 1, 16, 16);
  bf16.dtype = DType::bf16;
  // Element-misaligned data (a view one byte into a buffer) is named.
  testing::expect_error<ArgumentError>(
      [&] { check(bf16, [](Rwkv7Problem& p) { p.a = static_cast<const char*>(p.a) + 1; }); },
      "a: data must be aligned");
  testing::expect_error<ArgumentError>(
      [&] {
        check(rwkv7_case(1, 2, 1, 16, 16), [](Rwkv7Problem& p) {
          p.h0 = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.h0) + 2);
        });
      },
      "initial_state: data must be aligned");
}

#if ATTNZOO_WITH_CUDA

// Runs case `c` through recurrent_rwkv7 on the GPU (final state in place over the initial one when `in_place`;
// otherwise into a separate buffer that starts as NaN bytes, so an element the kernel forgets fails).
void check(const Rwkv7Case& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const Rwkv7Inputs in(c, seed);
  const testing::Rwkv7Outputs ref = testing::rwkv7_reference_outputs(c, in),
                              gpu = testing::rwkv7_gpu_outputs(c, in, in_place, recurrent_rwkv7);
  EXPECT_LE(testing::relative_rms(gpu.o, ref.o), testing::rwkv7_cuda_tolerance(c));
  EXPECT_LE(testing::relative_rms(gpu.s, ref.s), 1e-4);
}

// Engine-shaped decode steps, state in place: RWKV-7 1.5B's 32 heads of 64 x 64 at batch 8, and 128 x 128 heads.
TEST(CudaRwkv7Recurrent, MatchesDecodeStep) {
  REQUIRE_GPU();
  check(rwkv7_case(8, 1, 32, 64, 64), true, 100);
  check(rwkv7_case(2, 1, 8, 128, 128), true, 101);
}

// Packed sequences of 1, 7, 0 and 33 tokens (the empty one's final state is its initial state), with and without
// an initial state; K = 48, V = 40 leave the last warp's rows and the last slice's columns part empty.
TEST(CudaRwkv7Recurrent, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (bool in_place : {true, false})
    for (bool init : {true, false}) {
      Rwkv7Case c = rwkv7_case(1, 41, 2, 48, 40, init);
      c.cu_seqlens = {0, 1, 8, 8, 41};
      check(c, in_place, 200);
    }
}

// Small states pack several units to a CTA (recurrent_split.h): issue 26's decode step (B = 32, H = 40, K = V =
// 64: two units a CTA), and K = 32 (four) with ragged sequences of 1, 7, 0 and 33 tokens sharing CTAs (H = 3, one
// slice: three units a sequence).
TEST(CudaRwkv7Recurrent, MatchesPackedSmallStates) {
  REQUIRE_GPU();
  check(rwkv7_case(32, 1, 40, 64, 64), true, 500);
  Rwkv7Case c = rwkv7_case(1, 41, 3, 32, 32);
  c.cu_seqlens = {0, 1, 8, 8, 41};
  check(c, false, 501);
}

// K <= 16 runs the 16-row kernel (recurrent_split.h): ragged sequences of 1, 7, 0 and 33 tokens sharing CTAs, and
// a decode step with K off the rows (12) and V off the slices (40).
TEST(CudaRwkv7Recurrent, MatchesSixteenRowStates) {
  REQUIRE_GPU();
  Rwkv7Case c = rwkv7_case(1, 41, 3, 16, 40);
  c.cu_seqlens = {0, 1, 8, 8, 41};
  check(c, false, 510);
  check(rwkv7_case(9, 1, 2, 12, 40), true, 511);
}

TEST(CudaRwkv7Recurrent, MatchesShapesAndDecays) {
  REQUIRE_GPU();
  check(rwkv7_case(2, 65, 2, 100, 36), false, 300);      // K != V, off the tiles
  check(rwkv7_case(1, 5, 1, 256, 32, false), false, 301);  // eight warps
  check(rwkv7_case(3, 9, 2, 20, 130), true, 302);          // five column slices
  Rwkv7Case c = rwkv7_case(2, 33, 4, 64, 64);
  c.w_min = -21.f, c.w_max = -19.f;  // the state wiped every token
  check(c, true, 310);
  c.w_min = -0.05f, c.w_max = 0.f;  // carried across the sequence
  check(c, true, 311);
  c.w_min = -20.f;
  check(c, false, 312);
}

TEST(CudaRwkv7Recurrent, MatchesDtypes) {
  REQUIRE_GPU();
  Rwkv7Case c = rwkv7_case(2, 7, 4, 64, 64);
  c.dtype = DType::bf16;
  check(c, true, 400);
  c.out_dtype = DType::bf16;
  check(c, false, 401);
  c.dtype = c.out_dtype = DType::f16, c.B = 1, c.cu_seqlens = {0, 2, 7};
  check(c, true, 402);
}

#endif

}  // namespace
}  // namespace attnzoo
