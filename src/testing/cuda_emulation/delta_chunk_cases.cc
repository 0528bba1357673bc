// The CUDA chunked delta rule (delta_chunk_{intra,state,output}.cuh, launched as delta_chunk_launch plans it)
// under the CTA emulator against the double reference: gate none, per head and per key channel (KDA), ragged
// packed sequences with
// one-token, empty and chunk-unaligned ones, padded batches, HV = 2H, K and V off the 16 / 32 tiles and
// K = V = 128, chunk sizes 16, 32 and 64, l2norm, f32 / bf16 / f16 in and out, log decays near -20 and mild
// ones, zero, separate and in-place states. Outputs, separate final states and the whole scratch start as NaN
// bytes, so an element a kernel forgets (or reads before it is written) fails.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "testing/cuda_emulation/chunk_plan_run.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/delta_chunk_stages.h"
#include "testing/cuda_emulation/delta_operands.h"
#include "testing/cuda_emulation/device_tensor.h"

namespace attnzoo {
namespace {
using namespace cuda_delta_chunk;
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::HostTensor;

// The GPU test's bound (delta_chunk_cuda_test.cc). bf16 operands for every product dominate the error: about
// 4e-3 relative RMS on these cases, where a wrong mask, decay or missing term costs tens of percent.
constexpr double kTolerance = 1e-2;

// With `in_place` the final state overwrites the initial one; otherwise it goes to a separate NaN-filled buffer.
void check(const DeltaCase& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + " gate=" + std::to_string(int(c.gate)) + " in=" + dtype_name(c.dtype) +
               " out=" + dtype_name(c.out_dtype) + (in_place ? " in-place" : ""));
  const DeltaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f);
  (c.gate == DeltaGate::none   ? delta_rule_reference
   : c.gate == DeltaGate::head ? gated_delta_rule_reference
                               : kda_reference)(in.args(c, o_ref, &s_ref));

  cuda_emulation::DeltaOperands d(c, in, in_place);
  const DeltaArgs& a = d.args;
  const DeltaProblem p = make_delta_problem(a, c.gate);
  ASSERT_NO_THROW(check_cuda_delta_chunk(p));

  ChunkLaunch l = plan_delta_chunk(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_chunk_plan(
      l, seed, [&](auto c) { cuda_emulation::run_delta_chunk_stages<decltype(c)::value>(l); });
  d.download();
  EXPECT_LE(testing::relative_rms(d.o, o_ref), kTolerance);
  EXPECT_LE(testing::relative_rms(d.s, s_ref), kTolerance);
}

// Field by field: designated initializers that skip fields warn under -Wextra.
DeltaCase shape(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, DeltaGate gate,
                int64_t chunk = 64, bool init = true) {
  DeltaCase c;
  c.B = B, c.T = T, c.H = H, c.HV = HV, c.K = K, c.V = V, c.gate = gate, c.chunk_size = chunk;
  c.initial_state = init;
  return c;
}

const DeltaGate kGates[] = {DeltaGate::none, DeltaGate::head, DeltaGate::channel};

// Packed sequences of 1, 37, 0, 79 and 33 tokens (the empty one's final state is its initial state; the others
// end mid-chunk at every chunk size), HV = 2H, each chunk size.
TEST(EmulatedDeltaChunk, MatchesRaggedPackedSequences) {
  uint64_t seed = 100;
  for (DeltaGate gate : kGates)
    for (int64_t chunk : {16, 32, 64}) {
      DeltaCase c = shape(1, 150, 1, 2, 32, 32, gate, chunk);
      c.cu_seqlens = {0, 1, 38, 38, 117, 150};
      check(c, chunk == 32, seed++);
    }
}

// Padded batches (no cu_seqlens), one with a zero initial state; K and V off the 16- and 32-wide tiles; GQA.
TEST(EmulatedDeltaChunk, MatchesPaddedBatchesAndOddHeadDims) {
  uint64_t seed = 200;
  for (DeltaGate gate : kGates) {
    check(shape(2, 45, 1, 2, 32, 64, gate, 16, false), false, seed++);
    check(shape(2, 40, 2, 2, 40, 48, gate, 32), true, seed++);
    check(shape(1, 40, 2, 4, 32, 32, gate, 16), false, seed++);  // two key heads, each read by two value heads
  }
}

// fla's head dims on one chunk and a tail.
TEST(EmulatedDeltaChunk, MatchesWideHeads) {
  check(shape(1, 70, 1, 1, 128, 128, DeltaGate::head), false, 300);
  check(shape(1, 70, 1, 1, 128, 128, DeltaGate::channel), true, 301);
}

TEST(EmulatedDeltaChunk, MatchesDtypesAndL2Norm) {
  uint64_t seed = 400;
  for (DeltaGate gate : kGates) {
    DeltaCase c = shape(1, 50, 1, 2, 32, 32, gate, 32);
    c.cu_seqlens = {0, 19, 50};
    c.l2norm = true;
    c.dtype = DType::bf16;
    check(c, true, seed++);
    c.out_dtype = DType::bf16;
    c.l2norm = false;
    check(c, false, seed++);
    c.dtype = c.out_dtype = DType::f16;
    c.l2norm = true;
    check(c, false, seed++);
  }
}

// Log gates around -20 wipe the state each token (exp(-20) ~ 2e-9): exp(G_i) alone underflows within a chunk,
// so only decays taken as differences keep the result finite. Then a mix from -20 to 0, and mild decays.
TEST(EmulatedDeltaChunk, MatchesDecayStrengths) {
  uint64_t seed = 500;
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    DeltaCase c = shape(1, 80, 1, 2, 64, 32, gate);
    c.g_min = -21.f, c.g_max = -19.f;
    check(c, true, seed++);
    c = shape(1, 100, 1, 2, 32, 64, gate, 32);
    c.g_min = -20.f, c.g_max = 0.f;
    c.cu_seqlens = {0, 1, 60, 100};
    check(c, false, seed++);
    c.g_min = -0.05f, c.g_max = 0.f;
    check(c, true, seed++);
  }
}

// No tokens at all: no chunks, so only the state pass runs, and it copies each initial state to the final one.
TEST(EmulatedDeltaChunk, CopiesStatesOfEmptySequences) {
  DeltaCase c = shape(1, 0, 1, 2, 32, 32, DeltaGate::head);
  c.cu_seqlens = {0, 0, 0};
  check(c, false, 600);
}

// The plan: chunks never cross sequences, empty sequences own none, every kernel's sizes follow from the shape.
TEST(EmulatedDeltaChunk, PlansChunksPerSequence) {
  DeltaCase c = shape(1, 100, 1, 2, 40, 48, DeltaGate::head, 32);
  c.cu_seqlens = {0, 1, 1, 65, 100};
  const DeltaInputs in(c, 1);
  HostTensor o(DType::f32, {1, 100, 2, 48}, 0, 0.f);
  const DeltaProblem p = make_delta_problem(in.args(c, o, nullptr), DeltaGate::head);
  const ChunkLaunch l = plan_delta_chunk(p);
  cuda_emulation::expect_ragged_example_chunks(l);
  EXPECT_EQ(l.intra_grid, 10u);
}

}  // namespace
}  // namespace attnzoo
