// The CUDA gated linear recurrence (gla_recurrent_kernel.cuh, launched as gla_recurrent_launch plans it) under the
// CTA emulator against the double reference, with the GPU test's tolerances (gla_recurrent_cuda_test.cc): every
// family (linear attention with and without the normaliser and each feature map, retention, simple GLA with g,
// g_gamma or both, GLA), ragged packed sequences with a one-token and an empty one, one-token decode, HV = 2H,
// K and V off the 32-wide tiles (40, 48, 100) and K = 256 (eight warps), small states packed several units to a
// CTA (K = 16 .. 128, ragged sequences sharing a CTA), bf16 in and out, log decays near -20, zero and in-place
// states, an empty call that only copies the state. Outputs, separate final states and final normaliser sums
// start as NaN bytes, so an element the kernel forgets fails.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_testing.h"
#include "kernels/linear/retention/retention.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/gla_recurrent_stages.h"
#include "testing/cuda_emulation/recurrent_packing.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceTensor;
using cuda_emulation::download;
using cuda_emulation::on_device;
using testing::GlaDeviceCase;
using testing::GlaEntryArgs;
using testing::GlaFamily;
using testing::GlaInputs;
using testing::HostTensor;

double tolerance(const GlaDeviceCase& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// With `in_place` the final state overwrites the initial one (the engine's decode step); otherwise it goes to a
// separate NaN-filled buffer.
void check(const GlaDeviceCase& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const GlaInputs in(c, seed);
  const std::vector<int64_t> o_shape{c.B, c.T, c.HV, c.V}, s_shape{in.N, c.HV, c.K, c.V}, z_shape{in.N, 1, c.H, c.K};
  HostTensor o_ref(DType::f32, o_shape, 0, 0.f), s_ref(DType::f32, s_shape, 0, 0.f), z_ref(DType::f32, z_shape, 0, 0.f);
  testing::run_gla_entry(c.family, GlaPath::reference, in.args(c, o_ref, &s_ref, &z_ref));

  HostTensor o(c.out_dtype, o_shape, 0, 0.f), s(DType::f32, s_shape, 0, 0.f), z(DType::f32, z_shape, 0, 0.f);
  for (HostTensor* t : {&o, &s, &z}) std::memset(t->bytes.data(), 0xff, t->bytes.size());
  const DeviceTensor q = on_device(in.q), k = on_device(in.k), v = on_device(in.v), g = on_device(in.g),
                     g_gamma = on_device(in.g_gamma), z0 = on_device(in.z), od = on_device(o), sd = on_device(s),
                     zd = on_device(z);
  DeviceTensor init = on_device(in.init);
  if (!c.initial_state) std::memset(init.device.data(), 0xff, init.device.size());  // never read
  GlaEntryArgs a = in.args(c, o, &s, &z);
  a.q = q.device_view(), a.k = k.device_view(), a.v = v.device_view(), a.o = od.device_view();
  if (!a.g.empty()) a.g = g.device_view();
  if (!a.g_gamma.empty()) a.g_gamma = g_gamma.device_view();
  if (c.initial_state) a.opts.initial_state = init.device_view();
  a.opts.final_state = in_place ? init.device_view() : sd.device_view();
  if (c.normalize) {
    if (c.initial_state) a.opts.initial_z = z0.device_view();
    a.opts.final_z = zd.device_view();
  }
  std::vector<float> retention_gamma;
  const GlaProblem p = testing::gla_family_problem(c.family, a, retention_gamma);
  ASSERT_NO_THROW(check_cuda_gla_recurrent(p));

  cuda_gla::RecurrentLaunch l = cuda_gla::plan_gla_recurrent(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::expect_recurrent_packing(l, in.N * c.HV, c.K, c.V);
  cuda_emulation::run_gla_recurrent(l, seed);
  download(od, o);
  download(in_place ? init : sd, s);
  if (c.T > 0) {
    EXPECT_LE(testing::relative_rms(o, o_ref), tolerance(c));
  }
  EXPECT_LE(testing::relative_rms(s, s_ref), 1e-4);
  if (c.normalize) {
    download(zd, z);
    EXPECT_LE(testing::relative_rms(z, z_ref), 1e-5);
  }
}

// Every family's configurations, linear attention's feature maps with and without normalisation.
std::vector<GlaDeviceCase> family_cases(const GlaDeviceCase& shape) {
  return testing::gla_family_cases(shape, {{FeatureMap::identity, false},
                                           {FeatureMap::relu, false},
                                           {FeatureMap::elu_plus_one, true},
                                           {FeatureMap::relu, true}});
}

// Field by field: designated initializers that skip fields warn under -Wextra.
GlaDeviceCase shape(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, bool init = true) {
  GlaDeviceCase c;
  c.B = B, c.T = T, c.H = H, c.HV = HV, c.K = K, c.V = V, c.initial_state = init;
  return c;
}

// Packed sequences of 1, 3, 0 and 5 tokens (the empty one's final state is its initial state), HV = 2H, K and V
// that leave the last warp's rows and the last slice's columns part empty.
TEST(EmulatedGlaRecurrent, MatchesRaggedPackedSequences) {
  uint64_t seed = 100;
  for (bool init : {true, false}) {
    GlaDeviceCase s = shape(1, 9, 1, 2, 48, 40, init);
    s.cu_seqlens = {0, 1, 4, 4, 9};
    for (const GlaDeviceCase& c : family_cases(s)) check(c, init, ++seed);
  }
}

// Small states pack several units into a CTA: K = 16 and 32 four, 64 two, 128 one. HV = 3 with one slice gives
// three units a sequence, so CTAs straddle sequences: the ragged batch's 1-, 3-, 0- and 5-token sequences share
// CTAs and their barriers (a finished sequence's z and state kept while the others run on); the decode step's
// 5 x 3 x 2 units leave the last CTA's tail empty at K <= 64.
TEST(EmulatedGlaRecurrent, MatchesPackedSmallStates) {
  uint64_t seed = 900;
  for (int64_t K : {16, 32, 64, 128}) {
    GlaDeviceCase s = shape(1, 9, 1, 3, K, 32);
    s.cu_seqlens = {0, 1, 4, 4, 9};
    for (const GlaDeviceCase& c : family_cases(s)) check(c, true, ++seed);
    for (const GlaDeviceCase& c : family_cases(shape(5, 1, 1, 3, K, 40))) check(c, false, ++seed);
  }
}

// One decode step of a padded batch: V = 100 takes four column slices, the last with 4 columns.
TEST(EmulatedGlaRecurrent, MatchesDecodeStep) {
  uint64_t seed = 200;
  for (const GlaDeviceCase& c : family_cases(shape(2, 1, 1, 2, 100, 100))) check(c, true, ++seed);
}

// K = 256: eight warps, the widest state the kernel keeps in registers; a zero initial state.
TEST(EmulatedGlaRecurrent, MatchesWidestKeys) {
  uint64_t seed = 300;
  for (GlaDeviceCase c : family_cases(shape(1, 3, 1, 1, 256, 32, false)))
    if (c.family != GlaFamily::simple_gla || c.g_gamma) check(c, false, ++seed);
}

TEST(EmulatedGlaRecurrent, MatchesBf16) {
  uint64_t seed = 400;
  GlaDeviceCase s = shape(1, 5, 2, 4, 40, 48);
  s.cu_seqlens = {0, 2, 5};
  s.dtype = DType::bf16;
  for (const GlaDeviceCase& c : family_cases(s)) check(c, true, ++seed);
  s.out_dtype = DType::bf16;
  for (const GlaDeviceCase& c : family_cases(s)) check(c, false, ++seed);
}

// Log gates around -20 wipe the state each token (exp(-20) ~ 2e-9): what is left is the last token's write;
// and e^-5 to e^-1 per step, per channel and per head.
TEST(EmulatedGlaRecurrent, MatchesStrongDecays) {
  uint64_t seed = 500;
  for (GlaFamily f : {GlaFamily::gla, GlaFamily::simple_gla})
    for (auto [lo, hi] : {std::pair{-21.f, -19.f}, {-5.f, -1.f}}) {
      GlaDeviceCase c = shape(2, 4, 1, 2, 64, 36);
      c.family = f, c.g_min = lo, c.g_max = hi;
      check(c, true, ++seed);
      c.g_gamma = f == GlaFamily::simple_gla;
      c.cu_seqlens = {0, 1, 8};
      c.B = 1, c.T = 8;
      check(c, false, ++seed);
    }
}

// A call without tokens still writes the state it was given (the CPU paths' behaviour), z included.
TEST(EmulatedGlaRecurrent, EmptyInputCopiesTheState) {
  uint64_t seed = 600;
  for (const GlaDeviceCase& c : family_cases(shape(2, 0, 1, 1, 32, 32))) check(c, false, ++seed);
}

}  // namespace
}  // namespace attnzoo
