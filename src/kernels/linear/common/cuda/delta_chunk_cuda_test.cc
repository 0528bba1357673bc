// The CUDA chunked delta rule, gated delta rule and KDA: what they refuse (checked on the host, no GPU needed, in every build), and, on a
// GPU, its outputs and final states against the CPU chunked kernel and the double-precision reference run on the
// same host data, through the public chunked entries (so the device branch, the deferred value scans, the
// scratch and the three launches are all exercised). Compiled by g++: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/delta_gpu_run.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::HostTensor;

// A host problem of the given shape (check_cuda_delta_chunk reads only shapes, dtypes and addresses).
DeltaProblem problem(int64_t K, int64_t V, int64_t chunk = 64, DeltaGate gate = DeltaGate::head,
                     DType dtype = DType::f32) {
  static std::vector<std::unique_ptr<DeltaInputs>> keep;  // the problem points into them
  static std::vector<std::unique_ptr<HostTensor>> outs;
  DeltaCase c;
  c.B = 1, c.T = 3, c.H = 1, c.HV = 2, c.K = K, c.V = V, c.gate = gate, c.initial_state = true;
  c.chunk_size = chunk, c.dtype = dtype;
  keep.push_back(std::make_unique<DeltaInputs>(c));
  outs.push_back(std::make_unique<HostTensor>(DType::f32, std::vector<int64_t>{1, 3, 2, V}, 0, 0.f));
  return make_delta_problem(keep.back()->args(c, *outs.back(), nullptr), gate);
}

TEST(CudaDeltaChunk, RefusesWhatItDoesNotDo) {
  EXPECT_NO_THROW(check_cuda_delta_chunk(problem(128, 128)));
  EXPECT_NO_THROW(check_cuda_delta_chunk(problem(40, 100, 16, DeltaGate::none, DType::bf16)));
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_chunk(problem(129, 64)); }, "q: K=129 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_chunk(problem(64, 256)); }, "v: V=256 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_chunk(problem(64, 64, 128)); },
                                       "chunk_size: the CUDA chunked kernels run chunks of 16, 32 or 64 tokens");
  EXPECT_NO_THROW(check_cuda_delta_chunk(problem(128, 128, 64, DeltaGate::channel)));

  // Element-misaligned data (a view one byte into a buffer) is named.
  DeltaProblem p = problem(64, 64);
  p.k.data = static_cast<char*>(p.k.data) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_chunk(p); }, "k: data must be aligned");
  p = problem(64, 64, 64, DeltaGate::head, DType::bf16);
  p.g.data = static_cast<char*>(p.g.data) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_chunk(p); }, "g: data must be aligned");
  p = problem(64, 64);
  p.final_state = reinterpret_cast<float*>(reinterpret_cast<char*>(const_cast<float*>(p.initial_state)) + 2);
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_chunk(p); }, "final_state: data must be");
}

// Shared memory per block against what a block may opt into: 99 KB on sm_86 / sm_89, 163 KB on sm_80, 227 KB
// on sm_90. The delta rule and gated delta rule fit every GPU at their largest shape (K = V = 128, 64-token
// chunks); KDA needs sm_80's at that shape, and fits every GPU with 32-token chunks.
TEST(CudaDeltaChunk, PlansSharedMemoryTheGpusHave) {
  auto largest = [](int64_t chunk, DeltaGate gate) {
    const cuda_delta_chunk::ChunkLaunch l = cuda_delta_chunk::plan_delta_chunk(problem(128, 128, chunk, gate));
    EXPECT_FALSE(l.empty);
    return std::max({l.intra_smem, l.state_smem, l.output_smem});
  };
  EXPECT_LE(largest(64, DeltaGate::none), 99u * 1024);
  EXPECT_LE(largest(64, DeltaGate::head), 99u * 1024);
  EXPECT_LE(largest(64, DeltaGate::channel), 163u * 1024);
  EXPECT_LE(largest(32, DeltaGate::channel), 99u * 1024);
}

#if ATTNZOO_WITH_CUDA

using Entry = void (*)(const DeltaArgs&);
Entry chunk(DeltaGate gate) {
  return gate == DeltaGate::none ? chunk_delta_rule : gate == DeltaGate::head ? chunk_gated_delta_rule : chunk_kda;
}
Entry reference(DeltaGate gate) {
  return gate == DeltaGate::none ? delta_rule_reference
                                 : gate == DeltaGate::head ? gated_delta_rule_reference : kda_reference;
}

// Relative RMS error allowed against the reference: the products run on bf16 operands (about 4e-3 on these
// shapes, see delta_chunk_cuda.h), the emulator test's bound. The CPU chunked kernel is f32 throughout (1e-4 from
// the reference), so the GPU is held to the same bound against it.
constexpr double kTolerance = 1e-2;

// Runs case `c` on the GPU (final state in place when `in_place`; otherwise into a separate buffer that starts as
// NaN bytes, so an element the kernels forget fails) and compares with the CPU chunked kernel and the reference.
void check_case(const DeltaCase& c, bool in_place, uint64_t seed = 1) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const DeltaInputs in(c, seed);
  const testing::DeltaOutputs ref = testing::delta_host_outputs(c, in, reference(c.gate)),
                              cpu = testing::delta_host_outputs(c, in, chunk(c.gate)),
                              gpu = testing::delta_gpu_outputs(c, in, in_place, chunk(c.gate));
  EXPECT_LE(testing::relative_rms(gpu.o, cpu.o), kTolerance);
  EXPECT_LE(testing::relative_rms(gpu.s, cpu.s), kTolerance);
  EXPECT_LE(testing::relative_rms(gpu.o, ref.o), kTolerance);
  EXPECT_LE(testing::relative_rms(gpu.s, ref.s), kTolerance);
}

const DeltaGate kGates[] = {DeltaGate::none, DeltaGate::head, DeltaGate::channel};

// fla's prefill shape (K = V = 128, HV = 2H) over several chunks, at every chunk size.
TEST(CudaDeltaChunk, MatchesPrefill) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates)
    for (int64_t cs : {16, 32, 64})
      check_case({.B = 2, .T = 300, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .initial_state = true,
                  .chunk_size = cs},
                 cs == 64);
}

// Packed sequences of 1, 63, 0, 130 and 9 tokens (chunk-unaligned tails, an empty one whose final state is its
// initial state), head dims off the tiles, a zero initial state.
TEST(CudaDeltaChunk, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates)
    for (bool in_place : {true, false}) {
      check_case({.T = 203, .H = 1, .HV = 2, .K = 64, .V = 80, .gate = gate, .initial_state = true,
                  .cu_seqlens = {0, 1, 64, 64, 194, 203}},
                 in_place);
      check_case({.T = 203, .H = 2, .HV = 2, .K = 100, .V = 40, .gate = gate, .cu_seqlens = {0, 130, 203},
                  .chunk_size = 32},
                 false, 2);
    }
}

TEST(CudaDeltaChunk, MatchesDecayStrengths) {
  REQUIRE_GPU();
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    // Log gates around -20: exp(G) underflows inside a chunk; only differences of G keep the result finite.
    check_case({.T = 200, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .g_min = -21.f, .g_max = -19.f,
                .initial_state = true},
               true);
    check_case({.T = 200, .H = 2, .HV = 4, .K = 64, .V = 64, .gate = gate, .g_min = -20.f, .g_max = 0.f,
                .initial_state = true, .cu_seqlens = {0, 1, 77, 200}},
               false);
    check_case({.T = 200, .H = 2, .HV = 4, .K = 64, .V = 64, .gate = gate, .g_min = -0.05f, .g_max = 0.f,
                .initial_state = true},
               true);
  }
}

TEST(CudaDeltaChunk, MatchesDtypesAndL2Norm) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates) {
    DeltaCase c{.T = 100, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .initial_state = true,
                .dtype = DType::bf16};
    check_case(c, true);
    c.out_dtype = DType::bf16;
    check_case(c, true);
    c.dtype = c.out_dtype = DType::f16;
    check_case(c, false);
    c = {.T = 100, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .initial_state = true, .l2norm = true};
    check_case(c, true);
    c.dtype = DType::bf16;
    c.cu_seqlens = {0, 1, 100};
    check_case(c, false);
  }
}

// check_values (the default) scans the device tensors on the device with the host scan's wording.
TEST(CudaDeltaChunk, ScansValuesOnTheDevice) {
  REQUIRE_GPU();
  const DeltaCase c{.T = 4, .H = 1, .HV = 2, .K = 32, .V = 32, .gate = DeltaGate::head, .initial_state = true};
  DeltaInputs in(c);
  store_from_f32(in.g.view.data, DType::f32, 5, 0.5f);
  HostTensor o(DType::f32, {1, 4, 2, 32}, 0, 0.f), s(DType::f32, {1, 2, 32, 32}, 0, 0.f);
  const testing::OnDevice q(in.q), k(in.k), v(in.v), g(in.g), beta(in.beta), init(in.init), od(o), sd(s);
  DeltaArgs a = in.args(c, o, &s);
  a.q = q.view, a.k = k.view, a.v = v.view, a.g = g.view, a.beta = beta.view, a.o = od.view;
  a.initial_state = init.view, a.final_state = sd.view;
  testing::expect_error<ArgumentError>([&] { chunk_gated_delta_rule(a); },
                                       "g: log decays must be <= 0, found 0.500000 at flat index 5");
  a.check_values = false;
  EXPECT_NO_THROW(chunk_gated_delta_rule(a));
  synchronize(current_stream());
}

#else

TEST(CudaDeltaChunk, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
