// Mamba-2's chunked SSD on CUDA tensor cores: what it refuses (checked on the host, no GPU needed), and, on a
// GPU, its outputs and final states against the double-precision reference and the CPU chunked form run on the
// same host data, through the public entry (mamba2_chunk_scan), so the device branch (and its fall back to the
// recurrent kernel for N > 128) and the launch are both exercised. Compiled by g++ in every CUDA build: no CUDA
// headers here.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "kernels/linear/mamba2/cuda/mamba2_gpu_run.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "testing/test_util.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {
using Case = testing::Mamba2DeviceCase;
using Inputs = testing::Mamba2DeviceInputs;

#if ATTNZOO_WITH_CUDA

TEST(CudaMamba2Chunk, RefusesWhatItDoesNotDo) {
  auto check = [](const Case& c, auto&& edit) { testing::check_mamba2_problem(c, edit, check_cuda_mamba2_chunk); };
  auto nothing = [](Mamba2Problem&) {};
  EXPECT_NO_THROW(check({.P = 128, .N = 128, .chunk = 16}, nothing));
  testing::expect_error<ArgumentError>([&] { check({.N = 256}, nothing); }, "B: state size N=256 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check({.P = 130}, nothing); }, "x: head dim P=130 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check({.chunk = 128}, nothing); }, "chunk_size: ");
  testing::expect_error<ArgumentError>(
      [&] { check({.dtype = DType::bf16}, [](Mamba2Problem& p) { p.Bm = static_cast<const char*>(p.Bm) + 1; }); },
      "B: data must be aligned");
  testing::expect_error<ArgumentError>(
      [&] { check({}, [](Mamba2Problem& p) { p.A_in.data = static_cast<char*>(p.A_in.data) + 2; }); },
      "A: data must be aligned");
}

// The gated-linear kernels' bound (gla_chunk_cuda_test.cc): bf16 operands for every product dominate the error,
// where a wrong mask, decay, step or missing term costs tens of percent. The fall back to the recurrent kernel
// (N > 128) meets it with room to spare.
constexpr double kTolerance = 1e-2;

// Runs case `c` through mamba2_chunk_scan on the GPU (final state in place over the initial one when
// `in_place`; otherwise into a separate buffer that starts as NaN bytes) against the reference and the CPU twin.
void check_chunk(const Case& c, bool in_place) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const Inputs in(c);
  const testing::Mamba2Outputs ref = testing::mamba2_host_outputs(c, in, mamba2_reference),
                               cpu = testing::mamba2_host_outputs(c, in, mamba2_chunk_scan),
                               gpu = testing::mamba2_gpu_outputs(c, in, in_place, mamba2_chunk_scan);
  if (c.T > 0) {
    EXPECT_LE(testing::relative_rms(gpu.y, ref.y), kTolerance);
    EXPECT_LE(testing::relative_rms(gpu.y, cpu.y), kTolerance);
  }
  EXPECT_LE(testing::relative_rms(gpu.s, ref.s), kTolerance);
  EXPECT_LE(testing::relative_rms(gpu.s, cpu.s), kTolerance);
}

// Mamba-2 2.7B's heads (H = 80, P = 64, N = 128, one group) over a long prompt; Nemotron-H-like groups (8 heads
// per group), and 8 groups of 4 heads over ragged packed sequences (each group's B and C B^T formed once, shared
// by its heads); Falcon-H1-like N = 256, which the device branch sends to the recurrent kernel.
TEST(CudaMamba2Chunk, MatchesModelShapes) {
  REQUIRE_GPU();
  check_chunk({.T = 1000, .H = 80, .P = 64, .G = 1, .N = 128, .dtype = DType::bf16, .out_dtype = DType::bf16}, true);
  check_chunk({.B = 2, .T = 300, .H = 16, .P = 64, .G = 2, .N = 128, .dtype = DType::bf16}, false);
  check_chunk({.T = 333, .H = 32, .P = 64, .G = 8, .N = 128, .cu = {0, 1, 130, 130, 333}, .dtype = DType::bf16},
              true);
  check_chunk({.T = 70, .H = 4, .P = 64, .G = 2, .N = 256, .D_per_channel = true}, false);
}

// Packed sequences of 1, 37, 0, 79 and 33 tokens at each chunk size (ends mid-chunk everywhere), padded batches.
TEST(CudaMamba2Chunk, MatchesRaggedAndPaddedSequences) {
  REQUIRE_GPU();
  for (int64_t chunk : {16, 32, 64}) {
    check_chunk({.T = 150, .H = 4, .P = 32, .G = 2, .N = 64, .chunk = chunk, .cu = {0, 1, 38, 38, 117, 150}},
                chunk != 32);
    check_chunk({.B = 2, .T = 45, .H = 2, .P = 48, .N = 40, .chunk = chunk}, chunk == 32);
  }
  check_chunk({.T = 0, .H = 2, .P = 40, .N = 24, .cu = {0, 0, 0}}, false);  // states copied through
}

TEST(CudaMamba2Chunk, MatchesOptionsAndDtypes) {
  REQUIRE_GPU();
  check_chunk({.T = 40, .H = 4, .P = 64, .G = 2, .N = 64, .chunk = 32, .D_per_channel = true}, true);
  check_chunk({.B = 2, .T = 33, .H = 3, .P = 40, .G = 3, .N = 24, .chunk = 16, .with_z = false, .limit = true},
              false);
  check_chunk({.T = 50, .H = 2, .P = 8, .N = 16, .chunk = 32, .softplus = false, .limit = true}, true);
  check_chunk({.T = 66, .H = 2, .P = 64, .N = 128, .with_h0 = false}, false);
  check_chunk({.T = 50, .H = 2, .P = 32, .N = 64, .cu = {0, 19, 50}, .dtype = DType::f16}, false);
  check_chunk({.T = 50, .H = 2, .P = 32, .N = 64, .cu = {0, 19, 50}, .dtype = DType::f16,
               .out_dtype = DType::f16},
              true);
}

// exp(A dt') near e^-24 per token (the state is rebuilt from the last token) and near 1 - 2e-4 (it carries).
TEST(CudaMamba2Chunk, MatchesDecayStrengths) {
  REQUIRE_GPU();
  check_chunk({.T = 200, .H = 4, .P = 64, .N = 128, .A_min = -8.f, .A_max = -6.f, .dt_mean = 3.f}, true);
  check_chunk({.T = 200, .H = 4, .P = 64, .N = 128, .A_min = -0.02f, .A_max = -0.01f, .dt_mean = -4.f}, false);
}

#else

TEST(CudaMamba2Chunk, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
