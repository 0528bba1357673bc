// The CUDA chunked RWKV-7 (rwkv7_chunk_{intra,state,output}.cuh, launched as rwkv7_chunk_launch plans it) under
// the CTA emulator, against the double reference (rwkv7_reference) and the CPU chunk (chunk_rwkv7 on the host, the
// same chunk size): ragged packed sequences with one-token, empty and chunk-unaligned ones, padded batches, T below
// one chunk and T = 1, K and V off the 16 / 32 tiles, RWKV-7's head size 64 and 128, chunk sizes 16, 32 and 64,
// bf16 / f16 in and out, decays from none to e^-8 per step (and e^-20), with and without an initial state, in-place
// and separate states. Outputs, separate final states and the whole scratch start as NaN bytes, so an element a
// kernel forgets (or reads before it is written) fails. Then the same kernels on states addressed in a pool
// (ssm_state_indices: the GPU runner's prefill), in the style of pool_state_chunk_cases.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_intra.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_output.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_state.cuh"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "models/cuda/rwkv7_prefill_pieces.h"
#include "testing/cuda_emulation/chunk_plan_run.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/pool_states.h"
#include "testing/cuda_emulation/rwkv7_operands.h"
#include "testing/cuda_emulation/rwkv7_pool_prefill.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_rwkv7_chunk;
using cuda_emulation::DeviceTensor;
using testing::HostTensor;
using testing::Rwkv7Case;
using testing::Rwkv7Inputs;
using testing::rwkv7_case;

// rwkv7_chunk.cu's three kernels in its order, on the emulator.
template <int C>
void run_stages(const ChunkLaunch& l) {
  const Params& p = l.params;
  if (l.intra_grid)
    cuda_emulation::launch(dim3(l.intra_grid), kThreads, l.intra_smem,
                           [&](unsigned char* smem) { rwkv7_chunk_intra<C>(p, smem); });
  cuda_emulation::launch(dim3(l.state_grid), kThreads, l.state_smem,
                         [&](unsigned char* smem) { rwkv7_chunk_state<C>(p, smem); });
  if (l.output_grid)
    cuda_emulation::launch(dim3(l.output_grid), kThreads, l.output_smem,
                           [&](unsigned char* smem) { rwkv7_chunk_output<C>(p, smem); });
}

// With `in_place` the final state overwrites the initial one; otherwise it goes to a separate NaN-filled buffer.
void check(const Rwkv7Case& c, int64_t chunk, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + " chunk=" + std::to_string(chunk) + (in_place ? " in-place" : ""));
  const Rwkv7Inputs in(c, seed);
  auto cpu_chunk = [&](const Rwkv7Args& host) { chunk_rwkv7(host, chunk); };
  const testing::Rwkv7Outputs ref = testing::rwkv7_reference_outputs(c, in),
                              cpu = testing::rwkv7_host_outputs(c, in, cpu_chunk);

  cuda_emulation::Rwkv7Operands d(c, in, in_place);
  const Rwkv7Args& a = d.args;
  const Rwkv7Problem p = make_rwkv7_problem(a);
  ASSERT_NO_THROW(check_cuda_rwkv7_chunk(p, chunk));

  ChunkLaunch l = plan_rwkv7_chunk(p, chunk);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_chunk_plan(l, seed, [&](auto cs) { run_stages<decltype(cs)::value>(l); });
  d.download();
  const double tol = testing::rwkv7_chunk_cuda_tolerance();
  EXPECT_LE(testing::relative_rms(d.o, ref.o), tol);
  EXPECT_LE(testing::relative_rms(d.s, ref.s), tol);
  EXPECT_LE(testing::relative_rms(d.o, cpu.o), tol);
  EXPECT_LE(testing::relative_rms(d.s, cpu.s), tol);
}

// Packed sequences of 1, 37, 0, 79 and 33 tokens (the empty one's final state is its initial state; the others
// end mid-chunk at every chunk size), each chunk size, with and without initial states.
TEST(EmulatedRwkv7Chunk, MatchesRaggedPackedSequences) {
  uint64_t seed = 100;
  for (int64_t chunk : {16, 32, 64})
    for (bool init : {true, false}) {
      Rwkv7Case c = rwkv7_case(1, 150, 2, 32, 32, init);
      c.cu_seqlens = {0, 1, 38, 38, 117, 150};
      check(c, chunk, init && chunk == 32, seed++);
    }
}

// Padded batches (no cu_seqlens); K and V off the 16- and 32-wide tiles, both ways round.
TEST(EmulatedRwkv7Chunk, MatchesPaddedBatchesAndOddHeadDims) {
  check(rwkv7_case(2, 45, 1, 40, 48), 32, false, 200);
  check(rwkv7_case(2, 40, 2, 48, 40, false), 16, true, 201);
  check(rwkv7_case(1, 33, 1, 20, 100), 16, false, 202);
}

// Sequences shorter than one chunk, and single tokens: one partial chunk each.
TEST(EmulatedRwkv7Chunk, MatchesShortSequences) {
  check(rwkv7_case(3, 5, 2, 64, 64), 64, true, 300);
  check(rwkv7_case(2, 1, 2, 64, 64), 64, false, 301);
  Rwkv7Case c = rwkv7_case(1, 4, 1, 32, 32);
  c.cu_seqlens = {0, 1, 1, 4};
  check(c, 16, false, 302);
}

// RWKV-7's head size (64) over several chunks, and the widest heads (128) on one chunk and a tail.
TEST(EmulatedRwkv7Chunk, MatchesModelHeads) {
  check(rwkv7_case(1, 150, 2, 64, 64), 64, true, 400);
  check(rwkv7_case(1, 70, 1, 128, 128), 64, false, 401);
}

TEST(EmulatedRwkv7Chunk, MatchesDtypes) {
  Rwkv7Case c = rwkv7_case(1, 50, 2, 32, 32);
  c.cu_seqlens = {0, 19, 50};
  c.dtype = DType::bf16;
  check(c, 32, true, 500);
  c.out_dtype = DType::bf16;
  check(c, 16, false, 501);
  c.dtype = c.out_dtype = DType::f16;
  check(c, 32, false, 502);
}

// e^-8 per step (e^-512 over a 64-token chunk: e^{G_i} alone underflows, e^{-G_j} overflows), e^-20, every strength
// side by side channel by channel, decays near 0 (the state kept, only the low-rank part forgets), and decays
// around e^-3.5 whose 16-token spans straddle the Gram's tensor-core bound (kTensorCoreSpan), so the diagonal
// blocks of one chunk take both paths.
TEST(EmulatedRwkv7Chunk, MatchesDecayStrengths) {
  uint64_t seed = 600;
  for (auto [lo, hi] : {std::pair{-8.f, -7.f}, {-21.f, -19.f}, {-20.f, 0.f}, {-0.05f, 0.f}, {-4.5f, -2.5f}}) {
    Rwkv7Case c = rwkv7_case(1, 100, 1, 64, 32);
    c.w_min = lo, c.w_max = hi;
    c.cu_seqlens = {0, 1, 60, 100};
    check(c, 64, seed % 2 == 0, seed);
    ++seed;
    c = rwkv7_case(1, 70, 1, 32, 64, false);
    c.w_min = lo, c.w_max = hi;
    check(c, 32, false, seed++);
  }
}

// A long memory (decays near 0) over many chunks: the bf16 rounding of each chunk's products must not build up in
// the f32 state the chunks carry.
TEST(EmulatedRwkv7Chunk, MatchesLongSequencesWithLongMemory) {
  Rwkv7Case c = rwkv7_case(1, 700, 1, 64, 64);
  c.w_min = -0.02f, c.w_max = 0.f;
  check(c, 64, true, 650);
}

// No tokens at all: no chunks, so only the state pass runs, and it copies each initial state to the final one.
TEST(EmulatedRwkv7Chunk, CopiesStatesOfEmptySequences) {
  Rwkv7Case c = rwkv7_case(1, 0, 2, 32, 32);
  c.cu_seqlens = {0, 0, 0};
  check(c, 64, false, 700);
}

// The plan: chunks never cross sequences, empty sequences own none, every kernel's sizes follow from the shape.
TEST(EmulatedRwkv7Chunk, PlansChunksPerSequence) {
  Rwkv7Case c = rwkv7_case(1, 100, 2, 40, 48);
  c.cu_seqlens = {0, 1, 1, 65, 100};
  const Rwkv7Inputs in(c, 1);
  HostTensor o(DType::f32, {1, 100, 2, 48}, 0, 0.f);
  Rwkv7Args a = in.args(c);
  a.o = o.view;
  const ChunkLaunch l = plan_rwkv7_chunk(make_rwkv7_problem(a), 32);
  cuda_emulation::expect_ragged_example_chunks(l);
  EXPECT_EQ(l.intra_grid, 10u);
  // Every shape fits an A100's 163 KB per block, RWKV-7's heads of 64 also sm_86 / sm_89's 99 KB at every chunk
  // size (the GPU runner's chunk of 64 included) and two blocks on an H100's SM (228 KB, 1 KB of each reserved).
  for (int C : {16, 32, 64})
    for (int K : {64, 128}) {
      const size_t limit = (K == 64 ? 99u : 163u) * 1024;
      EXPECT_LE(IntraSmem(C, K, K).bytes, limit) << C << " " << K;
      EXPECT_LE(StateSmem(C, K).bytes, limit) << C << " " << K;
      EXPECT_LE(OutputSmem(C, K, K).bytes, limit) << C << " " << K;
    }
  EXPECT_LE(2 * (IntraSmem(64, 64, 64).bytes + 1024), 228u * 1024);
  // The scratch the runner's prefill pieces bound: per chunk of all heads, plus the table and each region's alignment.
  const size_t per_chunk = rwkv7_chunk_scratch_per_chunk(2, 40, 48, 32);
  EXPECT_GE(l.scratch_bytes, l.metadata_bytes + 5 * per_chunk);
  EXPECT_LE(l.scratch_bytes, l.metadata_bytes + 5 * per_chunk + 8 * 256);
  EXPECT_EQ(rwkv7_chunk_scratch_per_chunk(1, 64, 64, 64), 90368u);  // 88 KB a head at RWKV-7's shapes
}

// What only the CUDA chunk refuses, by name, before any device memory is read.
TEST(EmulatedRwkv7Chunk, RefusesWhatItCannotRun) {
  Rwkv7Case c = rwkv7_case(1, 8, 1, 32, 32);
  const Rwkv7Inputs in(c, 2);
  HostTensor o(DType::f32, {1, 8, 1, 32}, 0, 0.f);
  Rwkv7Args a = in.args(c);
  a.o = o.view;
  const Rwkv7Problem p = make_rwkv7_problem(a);
  testing::expect_error<ArgumentError>([&] { check_cuda_rwkv7_chunk(p, 128); }, "chunk_size: the CUDA chunked");
  Rwkv7Problem wide = p;
  wide.K = 160;
  testing::expect_error<ArgumentError>([&] { check_cuda_rwkv7_chunk(wide, 64); }, "r: K=160 exceeds 128");
}

// ---- Pool states: a packed prefill whose states are scattered, permuted rows of a padded slab ----

// The pool run against the dense run (rwkv7_pool_prefill.h): only the state pass's first read and last write move.
void check_pool(const Rwkv7Case& c, int64_t chunk, const std::vector<int32_t>& index, int64_t slots,
                uint64_t seed) {
  SCOPED_TRACE("chunk=" + std::to_string(chunk));
  cuda_emulation::check_rwkv7_pool_prefill(c, index, slots, 6, 10, seed, [&](const Rwkv7Args& a) {
    const Rwkv7Problem p = make_rwkv7_problem(a);
    ASSERT_NO_THROW(check_cuda_rwkv7_chunk(p, chunk));
    ChunkLaunch l = plan_rwkv7_chunk(p, chunk);
    ASSERT_FALSE(l.empty);
    cuda_emulation::run_chunk_plan(l, seed, [&](auto cs) { run_stages<decltype(cs)::value>(l); });
  });
}

// Sequences of 1, 37, 0, 79 and 33 tokens (the empty one's slot gets its initial state back) on scattered, permuted
// slots with a pad among them; RWKV-7's 64 x 64 heads and K != V off the tiles (a part-empty last state slice);
// chunk sizes 16, 32 and 64; f32 and bf16.
TEST(EmulatedPoolStateChunks, Rwkv7ChunkInPlace) {
  Rwkv7Case c = rwkv7_case(1, 150, 2, 32, 48);
  c.cu_seqlens = {0, 1, 38, 38, 117, 150};
  check_pool(c, 16, {6, 0, 3, -1, 8}, 10, 900);
  c.K = c.V = 64, c.dtype = c.out_dtype = DType::bf16;
  check_pool(c, 64, {2, 4, 1, 0, 3}, 5, 901);
  c = rwkv7_case(1, 100, 1, 40, 36);
  c.cu_seqlens = {0, 70, 71, 100};
  check_pool(c, 32, {-1, 2, 0}, 4, 902);
}

// ---- A long prefill in pieces (models/cuda/rwkv7_prefill_pieces.h: the GPU runner's bound on the scratch) ----

// The pieces of at most `budget` chunks, one call each in order on the pool's slots, against one call over the
// whole batch on a copy of the same pool: every output byte and every float of the slab the same (a cut sequence's
// f32 state goes through its slot between two pieces exactly as it stays in registers between two chunks).
void check_pieces(const Rwkv7Case& c, int64_t chunk, const std::vector<int32_t>& index, int64_t slots,
                  int64_t budget, size_t want_pieces, uint64_t seed) {
  SCOPED_TRACE(c.label() + " chunk=" + std::to_string(chunk) + " budget=" + std::to_string(budget));
  const Rwkv7Inputs in(c, seed);
  const cuda_emulation::Rwkv7GpuInputs inputs(in);
  const cuda_emulation::Indices idx(index);
  auto run = [&](const Rwkv7Args& a) {
    const Rwkv7Problem p = make_rwkv7_problem(a);
    ASSERT_NO_THROW(check_cuda_rwkv7_chunk(p, chunk));
    ChunkLaunch l = plan_rwkv7_chunk(p, chunk);
    if (l.empty) return;
    cuda_emulation::run_chunk_plan(l, seed, [&](auto cs) { run_stages<decltype(cs)::value>(l); });
  };
  auto whole_args = [&](cuda_emulation::Pool& pool, const DeviceTensor& o) {
    Rwkv7Args a = inputs.args(c, in, o);
    a.initial_state = a.final_state = cuda_emulation::pool_view(pool, index, in.h0.view.data, {c.H, c.K, c.V});
    a.ssm_state_indices = idx.data();
    return a;
  };
  const std::vector<int64_t> o_shape{c.B, c.T, c.H, c.V};
  cuda_emulation::Pool one(slots, 4, c.H * c.K * c.V, 4, seed + 100), split(slots, 4, c.H * c.K * c.V, 4, seed + 100);
  const DeviceTensor o_one(c.out_dtype, o_shape, 0), o_split(c.out_dtype, o_shape, 0);
  run(whole_args(one, o_one));
  const Rwkv7Args whole = whole_args(split, o_split);
  const std::vector<Rwkv7PrefillPiece> pieces = plan_rwkv7_prefill_pieces(c.cu_seqlens, chunk, budget);
  EXPECT_EQ(pieces.size(), want_pieces);
  for (const Rwkv7PrefillPiece& piece : pieces) run(rwkv7_piece_args(whole, piece));
  EXPECT_EQ(std::memcmp(o_one.device.data(), o_split.device.data(), o_one.device.size()), 0) << "outputs";
  EXPECT_EQ(std::memcmp(one.after(), split.after(), size_t(slots * one.stride()) * 4), 0) << "the slab";
}

// Sequences of 150, 1, 0 and 100 tokens (a pad among them in the second run), in 64-token chunks cut into pieces
// of 2 chunks (the first sequence cut once) and of 1 (cut twice, the last one once); 16-token chunks in pieces of 5.
TEST(EmulatedRwkv7Chunk, PiecesMatchOneCall) {
  Rwkv7Case c = rwkv7_case(1, 251, 2, 64, 64);
  c.cu_seqlens = {0, 150, 151, 151, 251};
  check_pieces(c, 64, {3, 0, 4, 1}, 6, 2, 3, 1000);
  check_pieces(c, 64, {3, -1, 4, 1}, 6, 1, 6, 1001);
  c = rwkv7_case(1, 100, 1, 32, 48);
  c.cu_seqlens = {0, 37, 100};
  check_pieces(c, 16, {1, 0}, 2, 5, 2, 1002);
}

}  // namespace
}  // namespace attnzoo
