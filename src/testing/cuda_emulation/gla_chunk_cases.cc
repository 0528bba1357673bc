// The CUDA chunked gated linear recurrence (gla_chunk_{prep,keys,state,output}.cuh, launched as gla_chunk_launch
// plans it) under the CTA emulator against the double reference and the CPU chunked kernels (its CPU twin): linear
// attention (each feature map), retention (host g_gamma), simple GLA with g, a device g_gamma or both, GLA's
// per-channel decays; ragged packed sequences with one-token, empty and chunk-unaligned ones, padded batches,
// HV = 2H (with per-head decays: the keys kernel's shared keys, queries and scores, the values decayed by the state
// pass), K != V off the 16 / 32 tiles and K = V = 128, chunk sizes 16, 32 and 64, f32 / bf16 / f16 in and out, log
// decays near -20, mixed and mild ones, zero, separate and in-place states. Outputs, separate final states and the
// whole scratch start as NaN bytes, so an element a kernel forgets (or reads before it is written) fails.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/cuda/gla_chunk_launch.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_testing.h"
#include "testing/cuda_emulation/chunk_plan_run.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/gla_chunk_stages.h"

namespace attnzoo {
namespace {
using namespace cuda_gla_chunk;
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;
using cuda_emulation::download;
using cuda_emulation::on_device;
using cuda_emulation::run_gla_chunk_stages;
using testing::GlaDeviceCase;
using testing::GlaEntryArgs;
using testing::GlaFamily;
using testing::GlaInputs;
using testing::HostTensor;

// The GPU test's bound (gla_chunk_cuda_test.cc). bf16 operands for every product dominate the error (2e-3 to
// 4e-3 relative RMS on these cases), where a wrong mask, decay or missing term costs tens of percent.
constexpr double kTolerance = 1e-2;

// With `in_place` the final state overwrites the initial one; otherwise it goes to a separate NaN-filled buffer.
void check(const GlaDeviceCase& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const GlaInputs in(c, seed);
  const std::vector<int64_t> o_shape{c.B, c.T, c.HV, c.V}, s_shape{in.N, c.HV, c.K, c.V};
  HostTensor o_ref(DType::f32, o_shape, 0, 0.f), s_ref(DType::f32, s_shape, 0, 0.f);
  testing::run_gla_entry(c.family, GlaPath::reference, in.args(c, o_ref, &s_ref));
  // The CPU twin: the chunked kernel on the host, in f32 throughout.
  HostTensor o_cpu(DType::f32, o_shape, 0, 0.f), s_cpu(DType::f32, s_shape, 0, 0.f);
  testing::run_gla_entry(c.family, GlaPath::chunk, in.args(c, o_cpu, &s_cpu));

  HostTensor o(c.out_dtype, o_shape, 0, 0.f), s(DType::f32, s_shape, 0, 0.f);
  for (HostTensor* t : {&o, &s}) std::memset(t->bytes.data(), 0xff, t->bytes.size());
  const DeviceTensor q = on_device(in.q), k = on_device(in.k), v = on_device(in.v), g = on_device(in.g),
                     g_gamma = on_device(in.g_gamma), od = on_device(o), sd = on_device(s);
  DeviceTensor init = on_device(in.init);
  if (!c.initial_state) std::memset(init.device.data(), 0xff, init.device.size());  // never read
  GlaEntryArgs a = in.args(c, o, &s);
  a.q = q.device_view(), a.k = k.device_view(), a.v = v.device_view(), a.o = od.device_view();
  if (!a.g.empty()) a.g = g.device_view();
  if (!a.g_gamma.empty()) a.g_gamma = g_gamma.device_view();
  if (c.initial_state) a.opts.initial_state = init.device_view();
  a.opts.final_state = in_place ? init.device_view() : sd.device_view();
  a.opts.check_values = false;  // the host scan would read the device copies
  std::vector<float> retention_gamma;
  const GlaProblem p = testing::gla_family_problem(c.family, a, retention_gamma);
  ASSERT_NO_THROW(check_cuda_gla_chunk(p));

  ChunkLaunch l = plan_gla_chunk(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_chunk_plan(l, seed, [&](auto c) { run_gla_chunk_stages<decltype(c)::value>(l); });
  download(od, o);
  download(in_place ? init : sd, s);
  if (c.T > 0) {
    EXPECT_LE(testing::relative_rms(o, o_ref), kTolerance);
    EXPECT_LE(testing::relative_rms(o, o_cpu), kTolerance);
  }
  EXPECT_LE(testing::relative_rms(s, s_ref), kTolerance);
  EXPECT_LE(testing::relative_rms(s, s_cpu), kTolerance);
}

// Every family's configurations the chunked kernels run: each feature map, none normalised (the normalised form
// goes to the recurrent kernel).
std::vector<GlaDeviceCase> family_cases(const GlaDeviceCase& shape) {
  return testing::gla_family_cases(shape, {{FeatureMap::identity, false},
                                           {FeatureMap::relu, false},
                                           {FeatureMap::elu_plus_one, false}});
}

// Field by field: designated initializers that skip fields warn under -Wextra.
GlaDeviceCase shape(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, int64_t chunk = 64,
                    bool init = true) {
  GlaDeviceCase c;
  c.B = B, c.T = T, c.H = H, c.HV = HV, c.K = K, c.V = V, c.chunk_size = chunk, c.initial_state = init;
  return c;
}

// Packed sequences of 1, 37, 0, 79 and 33 tokens (the empty one's final state is its initial state; the others
// end mid-chunk at every chunk size), HV = 2H; the chunk size turns with the family.
TEST(EmulatedGlaChunk, MatchesRaggedPackedSequences) {
  uint64_t seed = 100;
  GlaDeviceCase s = shape(1, 150, 1, 2, 32, 32);
  s.cu_seqlens = {0, 1, 38, 38, 117, 150};
  const int64_t chunks[] = {16, 32, 64};
  for (GlaDeviceCase c : family_cases(s)) {
    c.chunk_size = chunks[seed % 3];
    check(c, seed % 2 == 0, seed);
    ++seed;
  }
}

// Padded batches (no cu_seqlens), one with a zero initial state; K != V off the 16- and 32-wide tiles; GQA.
TEST(EmulatedGlaChunk, MatchesPaddedBatchesAndOddHeadDims) {
  uint64_t seed = 200;
  for (GlaFamily f : {GlaFamily::gla, GlaFamily::simple_gla, GlaFamily::linear_attn}) {
    GlaDeviceCase c = shape(2, 45, 1, 2, 32, 64, 16, false);
    c.family = f;
    check(c, false, seed++);
    c = shape(2, 40, 2, 2, 40, 48, 32);
    c.family = f, c.g_gamma = f == GlaFamily::simple_gla;
    check(c, true, seed++);
    c = shape(1, 40, 2, 4, 48, 40, 16);  // two key heads, each read by two value heads
    c.family = f;
    check(c, false, seed++);
  }
}

// fla's head dims on one chunk and a tail.
TEST(EmulatedGlaChunk, MatchesWideHeads) {
  GlaDeviceCase c = shape(1, 70, 1, 1, 128, 128);
  c.family = GlaFamily::simple_gla;
  check(c, false, 300);
  c.family = GlaFamily::gla;
  check(c, true, 301);
}

TEST(EmulatedGlaChunk, MatchesDtypes) {
  uint64_t seed = 400;
  for (GlaFamily f : {GlaFamily::gla, GlaFamily::simple_gla, GlaFamily::retention}) {
    GlaDeviceCase c = shape(1, 50, 1, 2, 32, 32, 32);
    c.family = f;
    c.cu_seqlens = {0, 19, 50};
    c.dtype = DType::bf16;
    check(c, true, seed++);
    c.out_dtype = DType::bf16;
    check(c, false, seed++);
    c.dtype = DType::f16;
    c.out_dtype = DType::f32;
    check(c, false, seed++);
  }
}

// Log gates around -20 wipe the state each token (exp(-20) ~ 2e-9): exp(G_i) alone underflows within a chunk and
// exp(-G_j) would overflow, so only decays taken as differences keep the result finite. Then a mix from -20 to 0,
// and mild decays, per head and per key channel.
TEST(EmulatedGlaChunk, MatchesDecayStrengths) {
  uint64_t seed = 500;
  for (GlaFamily f : {GlaFamily::simple_gla, GlaFamily::gla}) {
    GlaDeviceCase c = shape(1, 80, 1, 2, 64, 32);
    c.family = f, c.g_min = -21.f, c.g_max = -19.f;
    check(c, true, seed++);
    c = shape(1, 100, 1, 2, 32, 64, 32);
    c.family = f, c.g_min = -20.f, c.g_max = 0.f;
    c.cu_seqlens = {0, 1, 60, 100};
    check(c, false, seed++);
    c.g_min = -0.05f, c.g_max = 0.f;
    c.initial_state = false;
    check(c, true, seed++);
  }
}

// No tokens at all: no chunks, so only the state pass runs, and it copies each initial state to the final one.
TEST(EmulatedGlaChunk, CopiesStatesOfEmptySequences) {
  GlaDeviceCase c = shape(1, 0, 1, 2, 32, 32);
  c.family = GlaFamily::gla;
  c.cu_seqlens = {0, 0, 0};
  check(c, false, 600);
}

// What the chunked kernels cannot run is refused naming the argument (the device branch sends the normalised
// form to the recurrent kernel before asking).
TEST(EmulatedGlaChunk, RefusesWhatItCannotRun) {
  auto problem = [](GlaDeviceCase c, const GlaInputs& in, HostTensor& o) {
    std::vector<float> gamma;
    return testing::gla_family_problem(c.family, in.args(c, o, nullptr), gamma);
  };
  GlaDeviceCase c = shape(1, 8, 1, 1, 256, 32);
  c.family = GlaFamily::simple_gla;
  {
    const GlaInputs in(c);
    HostTensor o(DType::f32, {1, 8, 1, 32}, 0, 0.f);
    testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(problem(c, in, o)); }, "q: K=256 exceeds 128");
  }
  c = shape(1, 8, 1, 1, 32, 32, 64);
  c.chunk_size = 128;
  {
    const GlaInputs in(c);
    HostTensor o(DType::f32, {1, 8, 1, 32}, 0, 0.f);
    testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(problem(c, in, o)); }, "chunk_size: ");
  }
  c = shape(1, 8, 1, 1, 32, 32, 64, false);
  c.family = GlaFamily::linear_attn, c.normalize = true;
  {
    const GlaInputs in(c);
    HostTensor o(DType::f32, {1, 8, 1, 32}, 0, 0.f);
    testing::expect_error<ArgumentError>([&] { check_cuda_gla_chunk(problem(c, in, o)); }, "normalize: ");
  }
}

// The plan: chunks never cross sequences, empty sequences own none, a host g_gamma travels with the metadata,
// value heads sharing a key head share its keys kernel.
TEST(EmulatedGlaChunk, PlansChunksPerSequence) {
  GlaDeviceCase c = shape(1, 100, 1, 2, 40, 48, 32);
  c.family = GlaFamily::retention;
  c.cu_seqlens = {0, 1, 1, 65, 100};
  const GlaInputs in(c, 1);
  HostTensor o(DType::f32, {1, 100, 2, 48}, 0, 0.f);
  std::vector<float> gamma;
  const GlaProblem p = testing::gla_family_problem(c.family, in.args(c, o, nullptr), gamma);
  const ChunkLaunch l = plan_gla_chunk(p);
  cuda_emulation::expect_ragged_example_chunks(l);
  EXPECT_EQ(l.gamma, gamma);
  EXPECT_EQ(l.params.g_gamma, nullptr);  // bound to the uploaded copy by bind_scratch
  EXPECT_EQ(l.prep_grid, 10u);
  // A per-head decay with two value heads per key head: the key head's K and Q K^T once per chunk.
  EXPECT_TRUE(l.params.shared_keys);
  EXPECT_EQ(l.keys_grid, 5u);
}

}  // namespace
}  // namespace attnzoo
