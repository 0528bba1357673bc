// The CUDA RWKV-7 recurrence (rwkv7_recurrent_kernel.cuh, launched as rwkv7_recurrent_launch plans it) under the
// CTA emulator, against the double reference (rwkv7_reference) and the CPU twin (recurrent_rwkv7): ragged packed
// sequences with a one-token and an empty one, one-token decode at RWKV-7's head size (64) and at 128, K != V,
// K and V off the 32-wide tiles and K = 256 (eight warps), bf16 / f16 in and out, strong and mild decays, with and
// without an initial state, in-place and separate states. Outputs and separate final states start as NaN bytes,
// so an element the kernel forgets fails. Then a packed prefill on states in a pool's slots (the GPU runner's short
// prefills) against the same kernel on the dense states.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/pool_states.h"
#include "testing/cuda_emulation/recurrent_packing.h"
#include "testing/cuda_emulation/rwkv7_operands.h"
#include "testing/cuda_emulation/rwkv7_pool_prefill.h"
#include "testing/cuda_emulation/rwkv7_recurrent_stages.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::Rwkv7Case;
using testing::Rwkv7Inputs;
using testing::rwkv7_case;

// With `in_place` the final state overwrites the initial one (the engine's decode step); otherwise it goes to a
// separate NaN-filled buffer. The CPU twin runs the same host inputs, so the kernel is held to both.
void check(const Rwkv7Case& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const Rwkv7Inputs in(c, seed);
  const testing::Rwkv7Outputs ref = testing::rwkv7_reference_outputs(c, in),
                              cpu = testing::rwkv7_host_outputs(c, in, recurrent_rwkv7);

  cuda_emulation::Rwkv7Operands d(c, in, in_place);
  const Rwkv7Args& a = d.args;
  const Rwkv7Problem p = make_rwkv7_problem(a);
  ASSERT_NO_THROW(check_cuda_rwkv7_recurrent(p));

  cuda_rwkv7::RecurrentLaunch l = cuda_rwkv7::plan_rwkv7_recurrent(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::expect_recurrent_packing(l, c.nseq() * c.H, c.K, c.V);
  EXPECT_EQ(l.smem_bytes, cuda_rwkv7::stage_bytes(l.threads));
  cuda_emulation::run_rwkv7_recurrent(l, seed);
  d.download();
  EXPECT_LE(testing::relative_rms(d.o, ref.o), testing::rwkv7_cuda_tolerance(c));
  EXPECT_LE(testing::relative_rms(d.s, ref.s), 1e-4);
  EXPECT_LE(testing::relative_rms(d.o, cpu.o), testing::rwkv7_cuda_tolerance(c));
  EXPECT_LE(testing::relative_rms(d.s, cpu.s), 1e-4);
}

// Packed sequences of 1, 3, 0 and 5 tokens (the empty one's final state is its initial state); K = 48 and V = 40
// leave the last warp's rows and the last slice's columns part empty.
TEST(EmulatedRwkv7Recurrent, MatchesRaggedPackedSequences) {
  for (bool in_place : {true, false})
    for (bool init : {true, false}) {
      Rwkv7Case c = rwkv7_case(1, 9, 2, 48, 40, init);
      c.cu_seqlens = {0, 1, 4, 4, 9};
      check(c, in_place && init, 10 + uint64_t(in_place) + 2 * uint64_t(init));
    }
}

// Longer sequences (33 and 37 tokens, odd lengths) carry the state through both staging buffers many times.
TEST(EmulatedRwkv7Recurrent, MatchesOddLengths) {
  Rwkv7Case c = rwkv7_case(1, 70, 1, 32, 64);
  c.cu_seqlens = {0, 33, 70};
  check(c, false, 20);
  check(rwkv7_case(2, 37, 1, 64, 32, false), false, 21);
}

// One decode step of a padded batch, state in place: RWKV-7's 64 x 64 heads, and 128 x 128 (four warps, four
// column slices).
TEST(EmulatedRwkv7Recurrent, MatchesDecodeStep) {
  check(rwkv7_case(3, 1, 4, 64, 64), true, 30);
  check(rwkv7_case(2, 1, 2, 128, 128), true, 31);
}

// K != V both ways, off the tiles; K = 256 (eight warps), the widest state the kernel keeps in registers.
TEST(EmulatedRwkv7Recurrent, MatchesUnequalKeyAndValueDims) {
  check(rwkv7_case(1, 4, 1, 100, 36), false, 40);
  check(rwkv7_case(1, 4, 1, 20, 100), true, 41);
  check(rwkv7_case(1, 3, 1, 256, 32, false), false, 42);
}

// Small states pack several units into a CTA: K = 16 and 32 four, 64 two (RWKV-7's heads), 128 one. H = 3 with
// one slice gives three units a sequence, so CTAs straddle sequences: the ragged batch's 1-, 3-, 0- and 5-token
// sequences share CTAs and their barriers (the short ones' last outputs stored while the long one runs on); the
// decode step's 5 x 3 x 2 units leave the last CTA's tail empty at K <= 64.
TEST(EmulatedRwkv7Recurrent, MatchesPackedSmallStates) {
  uint64_t seed = 70;
  for (int64_t K : {16, 32, 64, 128}) {
    Rwkv7Case c = rwkv7_case(1, 9, 3, K, 32);
    c.cu_seqlens = {0, 1, 4, 4, 9};
    check(c, true, seed++);
    check(rwkv7_case(5, 1, 3, K, 40), false, seed++);
  }
}

TEST(EmulatedRwkv7Recurrent, MatchesDtypes) {
  Rwkv7Case c = rwkv7_case(1, 6, 2, 64, 48);
  c.cu_seqlens = {0, 2, 6};
  c.dtype = DType::bf16;
  check(c, true, 50);
  c.out_dtype = DType::bf16;
  check(c, false, 51);
  c.dtype = c.out_dtype = DType::f16;
  check(c, true, 52);
}

// Log decays around -20 wipe the state each token (what is left is the last token's write); decays near 0 keep
// it, so only the low-rank part forgets.
TEST(EmulatedRwkv7Recurrent, MatchesStrongAndMildDecays) {
  Rwkv7Case c = rwkv7_case(2, 5, 1, 64, 32);
  c.w_min = -21.f, c.w_max = -19.f;
  check(c, true, 60);
  c = rwkv7_case(1, 24, 1, 64, 64);
  c.w_min = -0.05f, c.w_max = 0.f;
  check(c, false, 61);
  c = rwkv7_case(1, 12, 1, 64, 64, false);
  c.w_min = -20.f, c.w_max = 0.f;  // every strength side by side, channel by channel
  c.cu_seqlens = {0, 1, 12};
  check(c, false, 62);
}

// ---- A packed prefill on a pool's slots (ssm_state_indices with cu_seqlens: the GPU runner's short prefills) ----

// The kernel on scattered, permuted slots of a padded slab against the kernel on the dense states gathered
// (rwkv7_pool_prefill.h).
void check_pool_prefill(const Rwkv7Case& c, const std::vector<int32_t>& index, int64_t slots, uint64_t seed) {
  cuda_emulation::check_rwkv7_pool_prefill(c, index, slots, 5, 3, seed, [&](const Rwkv7Args& a) {
    const Rwkv7Problem p = make_rwkv7_problem(a);
    ASSERT_NO_THROW(check_cuda_rwkv7_recurrent(p));
    cuda_rwkv7::RecurrentLaunch l = cuda_rwkv7::plan_rwkv7_recurrent(p);
    ASSERT_FALSE(l.empty);
    ASSERT_FALSE(l.seq_offsets.empty());  // packed: the offsets go up
    cuda_emulation::run_rwkv7_recurrent(l, seed);
  });
}

// Sequences of 1, 7, 0, 12 and 3 tokens on scattered, permuted slots with a pad among them; RWKV-7's 64 x 64 heads
// and K != V off the tiles.
TEST(EmulatedPoolStates, Rwkv7RecurrentPrefillInPlace) {
  Rwkv7Case c = rwkv7_case(1, 23, 2, 64, 64);
  c.cu_seqlens = {0, 1, 8, 8, 20, 23};
  check_pool_prefill(c, {6, 0, 3, -1, 8}, 10, 900);
  c = rwkv7_case(1, 23, 1, 48, 40);
  c.cu_seqlens = {0, 1, 8, 8, 20, 23};
  c.dtype = c.out_dtype = DType::bf16;
  check_pool_prefill(c, {2, 4, 1, 0, 3}, 5, 901);
}

}  // namespace
}  // namespace attnzoo
