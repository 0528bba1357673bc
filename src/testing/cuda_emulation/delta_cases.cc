// The CUDA delta-family recurrence (delta_recurrent_kernel.cuh, launched as delta_recurrent_launch plans it) and
// the device value scan (value_scan_kernel.cuh) under the CTA emulator. The recurrence against the double
// reference: the three gates, ragged packed sequences with a one-token and an empty one, one-token decode, HV =
// 2H, K and V off the 32-wide tiles (40, 48, 100) and K = 256 (eight warps), small states packed several units to
// a CTA (K = 16 .. 128, ragged sequences sharing a CTA), l2norm, bf16 / f16 in and out, log decays near -20, zero
// and in-place states. Outputs and separate final states start as NaN bytes, so an
// element the kernel forgets fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_launch.h"
#include "kernels/linear/common/cuda/value_scan_kernel.cuh"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/delta_operands.h"
#include "testing/cuda_emulation/delta_recurrent_stages.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/recurrent_packing.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::HostTensor;

void (*reference(DeltaGate gate))(const DeltaArgs&) {
  return gate == DeltaGate::none ? delta_rule_reference
                                 : gate == DeltaGate::head ? gated_delta_rule_reference : kda_reference;
}

// The GPU test's (delta_recurrent_cuda_test.cc): f32 arithmetic alone separates kernel and reference; a 16-bit
// output adds its rounding.
double tolerance(const DeltaCase& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// With `in_place` the final state overwrites the initial one (the engine's decode step); otherwise it goes to a
// separate NaN-filled buffer.
void check(const DeltaCase& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + " gate=" + std::to_string(int(c.gate)) + " in=" + dtype_name(c.dtype) +
               " out=" + dtype_name(c.out_dtype) + (in_place ? " in-place" : ""));
  const DeltaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f);
  reference(c.gate)(in.args(c, o_ref, &s_ref));

  cuda_emulation::DeltaOperands d(c, in, in_place);
  const DeltaArgs& a = d.args;
  const DeltaProblem p = make_delta_problem(a, c.gate);
  ASSERT_NO_THROW(check_cuda_delta_recurrent(p));

  cuda_delta::RecurrentLaunch l = cuda_delta::plan_delta_recurrent(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::expect_recurrent_packing(l, in.N * c.HV, c.K, c.V);
  cuda_emulation::run_delta_recurrent(l, c.gate, seed);
  d.download();
  EXPECT_LE(testing::relative_rms(d.o, o_ref), tolerance(c));
  EXPECT_LE(testing::relative_rms(d.s, s_ref), 1e-4);
}

const DeltaGate kGates[] = {DeltaGate::none, DeltaGate::head, DeltaGate::channel};

// The recurrences' packing (recurrent_split.h), shared by the delta, GLA and RWKV-7 plans: units of K rounded up
// to whole warps fill a 4-warp CTA where they fit, and a larger K runs a unit per CTA as before.
TEST(CudaRecurrentSplit, PacksSmallStates) {
  using cuda_linear::recurrent_grid;
  using cuda_linear::units_per_cta;
  EXPECT_EQ(units_per_cta(16), 4);
  EXPECT_EQ(units_per_cta(32), 4);
  EXPECT_EQ(units_per_cta(33), 2);
  EXPECT_EQ(units_per_cta(64), 2);
  EXPECT_EQ(units_per_cta(65), 1);
  EXPECT_EQ(units_per_cta(128), 1);
  EXPECT_EQ(units_per_cta(256), 1);
  // Issue 26's decode step: B = 32, H = 40, K = V = 64 is 32 x 40 x 2 units, 1280 CTAs of 128 threads (2560 of 64
  // unpacked).
  auto grid = recurrent_grid(32 * 40 * 2, 64);
  EXPECT_EQ(grid.ctas, 1280);
  EXPECT_EQ(grid.threads, 128);
  EXPECT_EQ(grid.units, 2);
  grid = recurrent_grid(30, 16);  // 7 full CTAs and one holding 2 units
  EXPECT_EQ(grid.ctas, 8);
  EXPECT_EQ(grid.threads, 128);
  EXPECT_EQ(grid.units, 4);
  grid = recurrent_grid(5, 96);  // three warps: alone
  EXPECT_EQ(grid.ctas, 5);
  EXPECT_EQ(grid.threads, 96);
  EXPECT_EQ(grid.units, 1);
  grid = recurrent_grid(3, 256);
  EXPECT_EQ(grid.ctas, 3);
  EXPECT_EQ(grid.threads, 256);
}

// Field by field: designated initializers that skip fields warn under -Wextra.
DeltaCase shape(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, DeltaGate gate, bool init = true) {
  DeltaCase c;
  c.B = B, c.T = T, c.H = H, c.HV = HV, c.K = K, c.V = V, c.gate = gate, c.initial_state = init;
  return c;
}

// Packed sequences of 1, 3, 0 and 5 tokens (the empty one's final state is its initial state), HV = 2H, K and V
// that leave the last warp's rows and the last slice's columns part empty.
TEST(EmulatedDeltaRecurrent, MatchesRaggedPackedSequences) {
  for (DeltaGate gate : kGates)
    for (bool in_place : {true, false}) {
      DeltaCase c = shape(1, 9, 1, 2, 48, 40, gate);
      c.cu_seqlens = {0, 1, 4, 4, 9};
      check(c, in_place, 10 + uint64_t(gate));
    }
}

// One decode step of a padded batch: V = 100 takes four column slices, the last with 4 columns.
TEST(EmulatedDeltaRecurrent, MatchesDecodeStep) {
  for (DeltaGate gate : kGates) check(shape(2, 1, 1, 2, 100, 100, gate), true, 20 + uint64_t(gate));
}

// K = 256: eight warps, the widest state the kernel keeps in registers; a zero initial state.
TEST(EmulatedDeltaRecurrent, MatchesWidestKeys) {
  for (DeltaGate gate : kGates) check(shape(1, 3, 1, 1, 256, 32, gate, false), false, 30 + uint64_t(gate));
}

TEST(EmulatedDeltaRecurrent, MatchesDtypesAndL2Norm) {
  for (DeltaGate gate : kGates) {
    DeltaCase c = shape(1, 5, 1, 2, 40, 48, gate);
    c.l2norm = true;
    c.cu_seqlens = {0, 2, 5};
    c.dtype = DType::bf16;
    check(c, true, 40 + uint64_t(gate));
    c.out_dtype = DType::bf16;
    c.l2norm = false;
    check(c, false, 43 + uint64_t(gate));
    c.dtype = c.out_dtype = DType::f16;
    check(c, true, 46 + uint64_t(gate));
  }
}

// Log gates around -20 wipe the state each token (exp(-20) ~ 2e-9): what is left is the last token's write.
TEST(EmulatedDeltaRecurrent, MatchesStrongDecays) {
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    DeltaCase c = shape(2, 4, 1, 2, 64, 32, gate);
    c.g_min = -21.f, c.g_max = -19.f;
    check(c, true, 50 + uint64_t(gate));
    c = shape(1, 6, 1, 1, 64, 36, gate);
    c.g_min = -20.f, c.g_max = 0.f;
    c.cu_seqlens = {0, 1, 6};
    check(c, false, 53 + uint64_t(gate));
  }
}

// Small states pack several units into a CTA: K = 16 and 32 four, 64 two, 128 one. HV = 3 with one slice gives
// three units a sequence, so CTAs straddle sequences: the ragged batch's 1-, 3-, 0- and 5-token sequences share
// CTAs and their barriers, the short ones idling through the long one's tokens; the decode step's 5 x 3 x 2 units
// leave the last CTA's tail empty at K <= 64.
TEST(EmulatedDeltaRecurrent, MatchesPackedSmallStates) {
  uint64_t seed = 60;
  for (int64_t K : {16, 32, 64, 128})
    for (DeltaGate gate : kGates) {
      DeltaCase c = shape(1, 9, 1, 3, K, 32, gate);
      c.cu_seqlens = {0, 1, 4, 4, 9};
      check(c, true, seed++);
      check(shape(5, 1, 1, 3, K, 40, gate), false, seed++);
    }
}

// delta_values.cu's scan over `n` elements of one dtype: 256 threads, `blocks` CTAs, then grid-stride, as the
// launcher sizes it for large tensors.
unsigned long long first_bad(const DeviceTensor& x, int64_t n, bool log_decay, unsigned blocks) {
  DeviceMemory first(sizeof(unsigned long long));
  std::memset(first.data(), 0xff, first.size());  // kNone
  auto* out = reinterpret_cast<unsigned long long*>(first.data());
  cuda_emulation::launch(dim3(blocks), 256, 0, [&](unsigned char*) {
    cuda_linear::first_bad_value(x.device.data(), cuda_linear::elem_of(x.view.dtype), n, log_decay, out);
  });
  return *out;
}

// The smallest offending index wins whichever CTA and grid-stride round meets it first: with 3 CTAs of 256
// threads, 1600 (CTA 0, second round) is found before 1290 (CTA 2, first round), and 1291 in 1290's warp races it.
TEST(EmulatedDeltaValues, FindsTheFirstBadValue) {
  const int64_t n = 2000;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    DeviceTensor x(dtype, {n}, 5);
    EXPECT_EQ(first_bad(x, n, false, 3), cuda_linear::kNone);
    store_from_f32(x.view.data, dtype, 1600, INFINITY);
    store_from_f32(x.view.data, dtype, 1291, -INFINITY);
    store_from_f32(x.view.data, dtype, 1290, NAN);
    x.upload();
    EXPECT_EQ(first_bad(x, n, false, 3), 1290u);
    EXPECT_EQ(first_bad(x, n, false, 1), 1290u);
    EXPECT_EQ(first_bad(x, 1290, false, 3), cuda_linear::kNone);  // the scan stops at n
  }
}

// Log decays: a positive one is found too, and only when the scan is for a gate.
TEST(EmulatedDeltaValues, FindsAPositiveLogDecay) {
  const int64_t n = 1000;
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    DeviceTensor g(dtype, {n}, 6, 0, -6.f);  // N(-6, 1): all negative
    EXPECT_EQ(first_bad(g, n, true, 2), cuda_linear::kNone);
    store_from_f32(g.view.data, dtype, 777, 0.5f);
    g.upload();
    EXPECT_EQ(first_bad(g, n, true, 2), 777u);
    EXPECT_EQ(first_bad(g, n, false, 2), cuda_linear::kNone);
  }
}

}  // namespace
}  // namespace attnzoo
