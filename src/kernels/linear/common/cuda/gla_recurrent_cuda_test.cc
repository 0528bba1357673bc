// The CUDA gated linear recurrence: what it refuses (checked on the host, no GPU needed), and, on a GPU, its
// outputs, final states and normaliser sums against the double-precision reference run on the same host data,
// through the public recurrent entries (so the device branch, the uploads and the launch are all exercised).
// Inputs are made on the host, copied to the device, and the views handed to the entry point there.
// Compiled by g++ in every CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_device_testing.h"
#include "kernels/linear/common/gla_testing.h"
#include "testing/device_test_util.h"
#include "testing/pool_slots_testing.h"

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

TEST(CudaGlaRecurrent, RefusesWhatItDoesNotDo) {
  auto problem = [](int64_t K, DType dtype = DType::f32) {
    static std::vector<std::unique_ptr<GlaInputs>> keep;  // the problem points into them
    static std::vector<std::unique_ptr<HostTensor>> outs;
    const GlaDeviceCase c{.family = GlaFamily::gla, .B = 1, .T = 2, .H = 1, .HV = 2, .K = K, .V = 16,
                          .initial_state = true, .dtype = dtype};
    keep.push_back(std::make_unique<GlaInputs>(c));
    outs.push_back(std::make_unique<HostTensor>(DType::f32, std::vector<int64_t>{1, 2, 2, 16}, 0, 0.f));
    const GlaEntryArgs a = keep.back()->args(c, *outs.back(), nullptr);
    return make_gla_problem(a.q, a.k, a.v, a.g, GateKind::channel, TensorView{}, a.o, a.opts);
  };
  EXPECT_NO_THROW(check_cuda_gla_recurrent(problem(256)));
  EXPECT_NO_THROW(check_cuda_gla_recurrent(problem(100, DType::bf16)));
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_recurrent(problem(257)); }, "q: K=257 exceeds 256");

  // Element-misaligned data (one byte into a buffer) is named.
  GlaProblem p = problem(64);
  p.v = static_cast<const char*>(p.v) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_recurrent(p); }, "v: data must be aligned");
  p = problem(64, DType::bf16);
  p.g = static_cast<const char*>(p.g) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_recurrent(p); }, "g: data must be aligned");
  p = problem(64);
  p.initial_state = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.initial_state) + 2);
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_recurrent(p); }, "initial_state: data must be");

  // Every CTA of a key head reads initial_z, so final_z may not overwrite it under them.
  float z[64] = {};
  p = problem(64);
  p.normalize = true;
  p.initial_z = z, p.final_z = z;
  testing::expect_error<ArgumentError>([&] { check_cuda_gla_recurrent(p); }, "final_z: must not be initial_z");
}

// Relative RMS error allowed: the kernel and the reference read the same (already rounded) inputs, so with an
// f32 output only f32 arithmetic separates them (a few ulps per step through the state, the CPU kernels' 1e-4
// with room); a bf16 output adds its rounding, as the CPU tests allow.
double tolerance(const GlaDeviceCase& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// Runs case `c` on the GPU (final state updated in place when `in_place`; otherwise into a separate buffer that
// starts as NaN bytes, so an element the kernel forgets fails) and compares with the reference. A device
// g_gamma when `device_gamma` (simple GLA; retention's is always the host's).
void check_case(const GlaDeviceCase& c, bool in_place, bool device_gamma = true, uint64_t seed = 1) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const testing::GlaDeviceRun r = testing::run_gla_on_device(c, GlaPath::recurrent, in_place, device_gamma, seed);
  EXPECT_LE(testing::relative_rms(r.o, r.o_ref), tolerance(c));
  EXPECT_LE(testing::relative_rms(r.s, r.s_ref), 1e-4);
  if (c.normalize) EXPECT_LE(testing::relative_rms(r.z, r.z_ref), 1e-5);
}

// One decode step of an engine-shaped batch, grouped value heads (HV = 2 H), in place and not.
TEST(CudaGlaRecurrent, MatchesDecodeStep) {
  REQUIRE_GPU();
  for (const GlaDeviceCase& c : gla_family_cases({.B = 8, .T = 1, .H = 4, .HV = 8, .K = 128, .V = 128,
                                                  .initial_state = true})) {
    check_case(c, true);
    check_case(c, false);
  }
}

// Ragged packed sequences (lengths 1, 7, 33 and an empty one), head sizes that leave partial warps and slices.
TEST(CudaGlaRecurrent, MatchesRaggedSequences) {
  REQUIRE_GPU();
  for (bool init : {false, true})
    for (GlaDeviceCase c : gla_family_cases({.B = 1, .T = 41, .H = 1, .HV = 2, .K = 100, .V = 60,
                                             .cu_seqlens = {0, 1, 8, 8, 41}}))
      c.initial_state = init, check_case(c, false);
  for (const GlaDeviceCase& c : gla_family_cases({.B = 3, .T = 33, .H = 2, .HV = 2, .K = 256, .V = 40}))
    check_case(c, false);
}

// Small states pack several units to a CTA (recurrent_split.h): B = 32, H = 40, K = V = 64 decode (two units a
// CTA), and K = 16 (four) with ragged sequences sharing CTAs (HV = 3, one slice: three units a sequence).
TEST(CudaGlaRecurrent, MatchesPackedSmallStates) {
  REQUIRE_GPU();
  for (const GlaDeviceCase& c : gla_family_cases({.B = 32, .T = 1, .H = 40, .HV = 40, .K = 64, .V = 64,
                                                  .initial_state = true}))
    check_case(c, true);
  for (const GlaDeviceCase& c : gla_family_cases({.B = 1, .T = 41, .H = 1, .HV = 3, .K = 16, .V = 32,
                                                  .cu_seqlens = {0, 1, 8, 8, 41}, .initial_state = true}))
    check_case(c, false);
}

// Strong decays (e^-5 per step) and mild ones, per channel and per head.
TEST(CudaGlaRecurrent, MatchesStrongAndMildDecays) {
  REQUIRE_GPU();
  for (GlaFamily f : {GlaFamily::gla, GlaFamily::simple_gla})
    for (auto [lo, hi] : {std::pair{-5.f, -1.f}, {-0.01f, 0.f}})
      check_case({.family = f, .B = 2, .T = 20, .H = 2, .HV = 4, .K = 64, .V = 64, .g_min = lo, .g_max = hi,
                  .initial_state = true},
                 true);
}

// bf16 inputs (and outputs), and a retention-style host g_gamma beside device tensors for simple GLA.
TEST(CudaGlaRecurrent, MatchesBf16AndHostGamma) {
  REQUIRE_GPU();
  for (const GlaDeviceCase& shape : {GlaDeviceCase{.B = 4, .T = 1, .H = 2, .HV = 4, .K = 128, .V = 128,
                                                   .initial_state = true, .dtype = DType::bf16},
                                     GlaDeviceCase{.B = 2, .T = 9, .H = 2, .HV = 2, .K = 64, .V = 96,
                                                   .initial_state = true, .dtype = DType::bf16,
                                                   .out_dtype = DType::bf16}})
    for (const GlaDeviceCase& c : gla_family_cases(shape)) check_case(c, false);
  check_case({.family = GlaFamily::simple_gla, .B = 2, .T = 5, .H = 1, .HV = 2, .K = 32, .V = 32, .g_gamma = true,
              .initial_state = true},
             false, /*device_gamma=*/false);
}

// A T = 0 call still writes the state it was given (the CPU paths' behaviour).
TEST(CudaGlaRecurrent, EmptyInputCopiesTheState) {
  REQUIRE_GPU();
  check_case({.family = GlaFamily::gla, .B = 2, .T = 0, .H = 1, .HV = 1, .K = 32, .V = 32, .initial_state = true},
             false);
}

// A device g_gamma is scanned on the device with the host scan's words, unless check_values is false.
TEST(CudaGlaRecurrent, ScansADeviceGamma) {
  REQUIRE_GPU();
  const GlaDeviceCase c{.family = GlaFamily::simple_gla, .B = 1, .T = 2, .H = 1, .HV = 3, .K = 32, .V = 32,
                        .g_gamma = true};
  GlaInputs in(c);
  in.g_gamma.view.ptr<float>()[2] = 0.25f;
  HostTensor o(DType::f32, {1, 2, 3, 32}, 0, 0.f);
  const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), gamma(in.g_gamma), od(o);
  GlaEntryArgs a = in.args(c, o, nullptr);
  a.q = q.view, a.k = k.view, a.v = v.view, a.g = g.view, a.g_gamma = gamma.view, a.o = od.view;
  testing::expect_error<ArgumentError>([&] { testing::run_gla_entry(c.family, GlaPath::recurrent, a); },
                                       "g_gamma: log decays must be <= 0, found 0.25");
  a.opts.check_values = false;
  EXPECT_NO_THROW(testing::run_gla_entry(c.family, GlaPath::recurrent, a));
  synchronize(current_stream());
}

// One decode step on states in a pool (ssm_state_indices, the GPU runner's lightning decode): scattered, permuted
// slots of a slab whose rows hold more than the state, and pads (-1), for every family but the normalised linear
// attention, against the reference on the same states gathered (testing/pool_slots_testing.h's checks: nothing
// else of the slab touched, the pads' outputs unwritten).
TEST(CudaGlaRecurrent, MatchesDecodeStepOnPoolSlots) {
  REQUIRE_GPU();
  GlaDeviceCase shape{.B = 8, .T = 1, .H = 2, .HV = 4, .K = 128, .V = 96, .initial_state = true};
  uint64_t seed = 7;
  for (const GlaDeviceCase& c : gla_family_cases(shape, {{FeatureMap::identity, false}})) {
    SCOPED_TRACE(c.label());
    testing::PoolSlots pool({6, 0, -1, 3, 9, -1, -1, -1}, 10, 24, c.HV * c.K * c.V, 8, seed);
    const int64_t N = pool.count();
    const GlaInputs in(c, seed++);
    HostTensor o_ref(DType::f32, {N, 1, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f);
    testing::run_gla_entry(c.family, GlaPath::reference, in.args(c, o_ref, &s_ref));
    pool.place(in.init.view.ptr<float>());

    HostTensor o(DType::f32, {N, 1, c.HV, c.V}, 0, 0.f);
    testing::fill_nan_bytes(o);
    const std::vector<int32_t>& index = pool.index;
    DeviceBuffer idx(Device::cuda(), index.size() * sizeof(int32_t));
    idx.upload(index.data(), index.size() * sizeof(int32_t));
    const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), gamma(in.g_gamma), od(o), slab(pool.slab);
    GlaEntryArgs a = in.args(c, o, nullptr);
    a.q = q.view, a.k = k.view, a.v = v.view, a.o = od.view;
    if (!a.g.empty()) a.g = g.view;
    if (!a.g_gamma.empty()) a.g_gamma = gamma.view;
    a.opts.initial_state = a.opts.final_state = pool.rows(slab.buffer.data(), {c.HV, c.K, c.V});
    a.opts.ssm_state_indices = idx.as<int32_t>();
    a.opts.check_values = false;
    testing::run_gla_entry(c.family, GlaPath::recurrent, a);
    synchronize(current_stream());
    od.download(o);
    slab.download(pool.slab);
    pool.expect_outputs(o, o_ref, c.HV * c.V, 1e-4);
    pool.expect_states(s_ref.view.ptr<float>(), 1e-4);
  }
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
