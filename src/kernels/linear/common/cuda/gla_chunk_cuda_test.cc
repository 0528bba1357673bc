// The CUDA chunked gated linear recurrence: what it refuses (checked on the host, no GPU needed), and, on a GPU,
// its outputs and final states against the double-precision reference run on the same host data, through the
// public chunked entries (so the device branch, the uploads and the three launches are all exercised). Inputs
// are made on the host, copied to the device, and the views handed to the entry point there. Compiled by g++ in
// every CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/cuda/gla_device_testing.h"
#include "kernels/linear/common/gla_testing.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {
using testing::gla_family_cases;
using testing::GlaDeviceCase;
using testing::GlaEntryArgs;
using testing::GlaFamily;
using testing::GlaInputs;
using testing::HostTensor;
using testing::OnDevice;

#if ATTNZOO_WITH_CUDA

TEST(CudaGlaChunk, RefusesWhatItDoesNotDo) {
  auto problem = [](int64_t K, int64_t V, DType dtype = DType::f32, int64_t chunk = 64) {
    static std::vector<std::unique_ptr<GlaInputs>> keep;  // the problem points into them
    static std::vector<std::unique_ptr<HostTensor>> outs;
    const GlaDeviceCase c{.family = GlaFamily::gla, .B = 1, .T = 2, .H = 1, .HV = 2, .K = K, .V = V,
                          .initial_state = true, .dtype = dtype, .chunk_size = chunk};
    keep.push_back(std::make_unique<GlaInputs>(c));
    outs.push_back(std::make_unique<HostTensor>(DType::f32, std::vector<int64_t>{1, 2, 2, V}, 0, 0.f));
    const GlaEntryArgs a = keep.back()->args(c, *outs.back(), nullptr);
    return make_gla_problem(a.q, a.k, a.v, a.g, GateKind::channel, TensorView{}, a.o, a.opts);
  };
  EXPECT_NO_THROW(check_cuda_gla_chunk(problem(128, 128)));
  EXPECT_NO_THROW(check_cuda_gla_chunk(problem(100, 40, DType::bf16, 16)));
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(problem(129, 64)); }, "q: K=129 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(problem(64, 192)); }, "v: V=192 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(problem(64, 64, DType::f32, 128)); },
                                       "chunk_size: the CUDA chunked kernels run chunks of 16, 32 or 64");
  GlaProblem p = problem(64, 64);
  p.v = static_cast<const char*>(p.v) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(p); }, "v: data must be aligned");
  p = problem(64, 64, DType::bf16);
  p.g = static_cast<const char*>(p.g) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(p); }, "g: data must be aligned");
  p = problem(64, 64);
  p.normalize = true;
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(p); }, "normalize: ");
}

// The emulator's bound (gla_chunk_cases.cc): bf16 operands for every product, a few 1e-3 relative RMS.
constexpr double kTolerance = 1e-2;

// Runs case `c` through the chunked entry on the GPU (final state in place when `in_place`; otherwise into a
// separate buffer that starts as NaN bytes) and compares with the reference. The normalised linear attention
// goes to the recurrent kernel, whose own tolerances are tighter; this one bounds both.
void check_case(const GlaDeviceCase& c, bool in_place, bool device_gamma = true, uint64_t seed = 1) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const testing::GlaDeviceRun r = testing::run_gla_on_device(c, GlaPath::chunk, in_place, device_gamma, seed);
  if (c.T > 0) {
    EXPECT_LE(testing::relative_rms(r.o, r.o_ref), kTolerance);
  }
  EXPECT_LE(testing::relative_rms(r.s, r.s_ref), kTolerance);
}

// Ragged packed sequences (lengths 1, 70, 0, 130: chunk-unaligned at every size), K != V off the tiles.
TEST(CudaGlaChunk, MatchesRaggedSequences) {
  REQUIRE_GPU();
  for (int64_t chunk : {16, 32, 64})
    for (bool init : {false, true})
      for (GlaDeviceCase c : gla_family_cases({.B = 1, .T = 201, .H = 1, .HV = 2, .K = 100, .V = 60,
                                               .cu_seqlens = {0, 1, 71, 71, 201}}))
        c.initial_state = init, c.chunk_size = chunk, check_case(c, init);
}

// fla's prefill shape, smaller: padded batch, K = V = 128, grouped value heads, bf16 in and out.
TEST(CudaGlaChunk, MatchesPrefillShapes) {
  REQUIRE_GPU();
  for (const GlaDeviceCase& c : gla_family_cases({.B = 2, .T = 300, .H = 2, .HV = 4, .K = 128, .V = 128,
                                                  .initial_state = true, .dtype = DType::bf16,
                                                  .out_dtype = DType::bf16}))
    check_case(c, false);
  for (const GlaDeviceCase& c : gla_family_cases({.B = 1, .T = 129, .H = 2, .HV = 2, .K = 64, .V = 128,
                                                  .initial_state = true, .dtype = DType::f16}))
    check_case(c, true);
}

// Log decays near -20 per step (exp(-G_j) would overflow within a chunk), a mix down to -20, and mild ones.
TEST(CudaGlaChunk, MatchesDecayStrengths) {
  REQUIRE_GPU();
  for (GlaFamily f : {GlaFamily::gla, GlaFamily::simple_gla})
    for (auto [lo, hi] : {std::pair{-21.f, -19.f}, {-20.f, 0.f}, {-0.01f, 0.f}})
      check_case({.family = f, .B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 64, .g_min = lo, .g_max = hi,
                  .initial_state = true},
                 true);
}

// A retention-style host g_gamma beside device tensors for simple GLA; a T = 0 call copies the state.
TEST(CudaGlaChunk, MatchesHostGammaAndEmptyInput) {
  REQUIRE_GPU();
  check_case({.family = GlaFamily::simple_gla, .B = 2, .T = 70, .H = 1, .HV = 2, .K = 32, .V = 32, .g_gamma = true,
              .initial_state = true},
             false, /*device_gamma=*/false);
  check_case({.family = GlaFamily::gla, .B = 2, .T = 0, .H = 1, .HV = 1, .K = 32, .V = 32, .initial_state = true},
             false);
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
