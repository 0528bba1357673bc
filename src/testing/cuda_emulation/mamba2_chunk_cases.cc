// Mamba-2's chunked SSD on the gated linear recurrence's CUDA chunked kernels
// (gla_chunk_{prep,keys,state,output}.cuh on the plan mamba2_chunk_launch makes) under the CTA emulator, against the
// double reference and the CPU chunked form (its CPU twin): ragged packed sequences with one-token, empty and
// chunk-unaligned ones, padded batches, one group and several (heads sharing B / C, formed once per group by the
// keys kernel, the decayed dt' x formed by the state pass from x; 1, 2 and 8 groups), Mamba-2 2.7B's head (P = 64,
// N = 128), chunk sizes 16, 32 and 64, f32 / bf16 / f16 in and out, strong and mild A dt, D per head and per
// channel, with and without z, softplus and the dt limits, zero, separate and in-place states. Outputs, separate
// final states and the whole scratch start as NaN bytes, so an element a kernel forgets (or reads before it is
// written) fails.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_launch.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/mamba2/problem.h"
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "testing/cuda_emulation/chunk_plan_run.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/gla_chunk_stages.h"
#include "testing/cuda_emulation/mamba2_operands.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_gla_chunk;
using cuda_emulation::run_gla_chunk_stages;
using testing::HostTensor;

// The GPU test's bound (mamba2_chunk_cuda_test.cc), the gated-linear kernels' own: bf16 operands for every
// product dominate the error, where a wrong mask, decay, step or missing term costs tens of percent.
constexpr double kTolerance = 1e-2;

using SsdCase = testing::Mamba2DeviceCase;
using testing::mamba2_case;

// With `in_place` the final state overwrites the initial one (the engine's prefill into its cache).
void check(const SsdCase& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const testing::Mamba2DeviceInputs in(c, seed);
  // The CPU twin: the chunked form on the host, in f32 throughout.
  const testing::Mamba2Outputs ref = testing::mamba2_host_outputs(c, in, mamba2_reference),
                               cpu = testing::mamba2_host_outputs(c, in, mamba2_chunk_scan);

  cuda_emulation::Mamba2Operands d(c, in, in_place);
  const Mamba2Args& a = d.args;
  const Mamba2Problem p = make_mamba2_problem(a);
  ASSERT_TRUE(cuda_mamba2_chunk_fits(p));
  ASSERT_NO_THROW(check_cuda_mamba2_chunk(p));

  ChunkLaunch l = cuda_mamba2::plan_mamba2_chunk(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_chunk_plan(l, seed, [&](auto c) { run_gla_chunk_stages<decltype(c)::value>(l); });
  d.download();
  if (c.T > 0) {
    EXPECT_LE(testing::relative_rms(d.o, ref.y), kTolerance);
    EXPECT_LE(testing::relative_rms(d.o, cpu.y), kTolerance);
  }
  EXPECT_LE(testing::relative_rms(d.s, ref.s), kTolerance);
  EXPECT_LE(testing::relative_rms(d.s, cpu.s), kTolerance);
}

// Mamba-2 2.7B's head (P = 64, N = 128, one group) over a chunk and a tail, and Nemotron-H-like groups: 4 heads
// reading 2 groups' B / C.
TEST(EmulatedMamba2Chunk, MatchesModelShapes) {
  SsdCase c = mamba2_case(1, 100, 2, 64, 1, 128);
  check(c, false, 100);
  c = mamba2_case(1, 70, 4, 64, 2, 128);
  c.dtype = c.out_dtype = DType::bf16;
  check(c, true, 101);
}

// B / C shared by the heads of a group: the keys kernel forms B and C B^T once per (chunk, group) and every head
// of the group reads them. One group of 4 heads, 2 of 3, 8 of 2 (Nemotron-H-like), and 8 groups of one head each
// (the per-head path), on ragged packed sequences ending mid-chunk and a padded batch.
TEST(EmulatedMamba2Chunk, MatchesGroupsSharingBC) {
  SsdCase c = mamba2_case(1, 133, 4, 32, 1, 64, 32);
  c.cu = {0, 5, 70, 70, 133};
  check(c, true, 700);
  c = mamba2_case(2, 77, 6, 64, 2, 128);
  c.dtype = c.out_dtype = DType::bf16;
  check(c, false, 701);
  c = mamba2_case(1, 100, 16, 16, 8, 32, 16);
  c.cu = {0, 1, 40, 100};
  c.D_per_channel = true;
  check(c, false, 702);
  c.H = 8;
  check(c, true, 703);
}

// Packed sequences of 1, 37, 0, 79 and 33 tokens (the empty one's final state is its initial state; the others
// end mid-chunk at every chunk size), then a padded batch, at each chunk size.
TEST(EmulatedMamba2Chunk, MatchesRaggedPackedSequences) {
  uint64_t seed = 200;
  for (int64_t chunk : {16, 32, 64}) {
    SsdCase c = mamba2_case(1, 150, 4, 32, 2, 64, chunk);
    c.cu = {0, 1, 38, 38, 117, 150};
    check(c, seed % 2 == 0, seed);
    ++seed;
    c = mamba2_case(2, 45, 2, 48, 1, 40, chunk);
    check(c, seed % 2 == 0, seed);
    ++seed;
  }
}

// D per channel, no gate, dt clamped with and without softplus, a zero initial state; head dims and state sizes
// off the 16- and 32-wide tiles.
TEST(EmulatedMamba2Chunk, MatchesOptions) {
  SsdCase c = mamba2_case(1, 40, 4, 64, 2, 64, 32);
  c.D_per_channel = true;
  check(c, true, 300);
  c = mamba2_case(2, 33, 3, 40, 3, 24, 16);
  c.with_z = false, c.limit = true;
  check(c, false, 301);
  c = mamba2_case(1, 50, 2, 8, 1, 16, 32);
  c.softplus = false, c.limit = true;
  check(c, true, 302);
  c = mamba2_case(1, 66, 2, 64, 1, 128);
  c.with_h0 = false;
  check(c, false, 303);
}

TEST(EmulatedMamba2Chunk, MatchesDtypes) {
  uint64_t seed = 400;
  SsdCase c = mamba2_case(1, 50, 2, 32, 1, 64, 32);
  c.cu = {0, 19, 50};
  c.dtype = DType::bf16;
  check(c, true, seed++);
  c.out_dtype = DType::bf16;
  check(c, false, seed++);
  c.dtype = DType::f16;
  c.out_dtype = DType::f32;
  check(c, false, seed++);
  c.out_dtype = DType::f16;
  check(c, true, seed++);
}

// exp(A dt') near e^-24 wipes the state each token: exp(G_i) alone underflows within a chunk and exp(-G_j) would
// overflow, so only decays taken as differences keep the result finite. Near 1 - 2e-4 the state keeps nearly
// everything across chunks.
TEST(EmulatedMamba2Chunk, MatchesStrongAndMildDecays) {
  SsdCase c = mamba2_case(1, 80, 2, 64, 1, 128);
  c.A_min = -8.f, c.A_max = -6.f, c.dt_mean = 3.f;
  check(c, true, 500);
  c.A_min = -0.02f, c.A_max = -0.01f, c.dt_mean = -4.f;
  c.cu = {0, 1, 60, 80};
  check(c, false, 501);
}

// No tokens at all: no chunks, so only the state pass runs, and it copies each [P, N] state through its strides.
TEST(EmulatedMamba2Chunk, CopiesStatesOfEmptySequences) {
  SsdCase c = mamba2_case(1, 0, 2, 40, 1, 24);
  c.cu = {0, 0, 0};
  check(c, false, 600);
}

// Mamba-2's [P, N] states run through the state kernel's strides, the groups are the key heads.
TEST(EmulatedMamba2Chunk, PlansGroupsAsKeyHeadsAndStatesTransposed) {
  HostTensor x(DType::f32, {1, 100, 6, 40}, 1), dt(DType::f32, {1, 100, 6}, 2), A(DType::f32, {6}, 3),
      Bm(DType::f32, {1, 100, 3, 24}, 4), y(DType::f32, {1, 100, 6, 40}, 0, 0.f);
  Mamba2Args a;
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = a.C = Bm.view, a.y = y.view, a.chunk_size = 32;
  const ChunkLaunch l = cuda_mamba2::plan_mamba2_chunk(make_mamba2_problem(a));
  EXPECT_EQ(l.params.H, 3);
  EXPECT_EQ(l.params.HV, 6);
  EXPECT_EQ(l.params.group, 2);
  EXPECT_EQ(l.params.K, 24);
  EXPECT_EQ(l.params.V, 40);
  EXPECT_EQ(l.params.state_row, 1);
  EXPECT_EQ(l.params.state_col, 24);
  EXPECT_EQ(l.params.scale, 1.f);
  EXPECT_EQ(l.prep_grid, 4u * 6);
  EXPECT_EQ(l.state_grid, 6u * 2);  // P = 40: two 32-column slices
  EXPECT_EQ(l.prep_smem, size_t(2 * 32 * 4));
  // Two heads per group: B and C B^T once per (chunk, group).
  EXPECT_TRUE(l.params.shared_keys);
  EXPECT_EQ(l.keys_grid, 4u * 3);
  EXPECT_EQ(l.keys_smem, keys_smem_bytes(32, 32));
  // One head per group: nothing to share, each head forms its own.
  HostTensor Bh(DType::f32, {1, 100, 6, 24}, 4);
  a.B = a.C = Bh.view;
  const ChunkLaunch per_head = cuda_mamba2::plan_mamba2_chunk(make_mamba2_problem(a));
  EXPECT_FALSE(per_head.params.shared_keys);
  EXPECT_EQ(per_head.keys_grid, 0u);
  // Shared: one factor per value row (the state pass decays x itself), not a bf16 copy of the values per head,
  // so less scratch than the per-head plan even with the scores.
  EXPECT_EQ(l.vb_at, l.kd_at + 4 * 3 * 32 * 32 * 2);  // kd per (chunk, group), no vb
  EXPECT_LT(l.scratch_bytes, per_head.scratch_bytes);
  EXPECT_EQ(l.output_smem, OutputSmem(32, 32, 64, false, /*keys=*/false).bytes);  // K not staged
  EXPECT_LT(l.output_smem, per_head.output_smem);
}

// What the chunked kernels cannot stage is refused naming the argument; the device branch sends N or P > 128 to
// the recurrent kernel before asking.
TEST(EmulatedMamba2Chunk, RefusesWhatItCannotRun) {
  auto problem = [](int64_t P, int64_t N, int64_t chunk) {
    Mamba2Problem p;
    p.batch = 1, p.T = 8, p.H = 2, p.P = P, p.G = 1, p.N = N, p.chunk_size = chunk;
    p.seqs = make_sequence_spans(1, 8, nullptr, 0);
    return p;
  };
  EXPECT_FALSE(cuda_mamba2_chunk_fits(problem(64, 256, 64)));
  EXPECT_FALSE(cuda_mamba2_chunk_fits(problem(192, 128, 64)));
  EXPECT_TRUE(cuda_mamba2_chunk_fits(problem(64, 128, 64)));
  testing::expect_error<ArgumentError>([&] { check_cuda_mamba2_chunk(problem(64, 256, 64)); }, "B: state size N=256");
  testing::expect_error<ArgumentError>([&] { check_cuda_mamba2_chunk(problem(192, 128, 64)); }, "x: head dim P=192");
  testing::expect_error<ArgumentError>([&] { check_cuda_mamba2_chunk(problem(64, 128, 128)); }, "chunk_size: ");
}

}  // namespace
}  // namespace attnzoo
