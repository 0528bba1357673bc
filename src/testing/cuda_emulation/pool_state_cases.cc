// The decode-form recurrences (delta rule, RWKV-7, gated linear) on states addressed in a pool (fla / vLLM's
// ssm_state_indices: the GPU runners' decode steps, device_conv_state.h, device_lightning.cc, rwkv7_cuda_runner.cc)
// under the CTA emulator; the one-step kernels are in pool_state_step_cases.cc. A one-token step per sequence whose
// states are scattered, permuted rows of a slab with a row stride of its own (room before and after each state, as
// a pool slot's [conv tail | state] has), and padded batch rows (index -1), some sharing a CTA with real rows where
// small states pack several units to a CTA. Against the dense CPU twins on the same states gathered: the outputs
// and the named rows' new states; and bit for bit, every byte the step must not touch: the other slots, the rest
// of each named slot, and the pads' outputs (NaN bytes, which stay NaN bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_launch.h"
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_testing.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/delta_recurrent_stages.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/gla_recurrent_stages.h"
#include "testing/cuda_emulation/gpu_inputs.h"
#include "testing/cuda_emulation/pool_states.h"
#include "testing/cuda_emulation/rwkv7_recurrent_stages.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceTensor;
using cuda_emulation::Indices;
using cuda_emulation::Pool;
using cuda_emulation::expect_rows;
using cuda_emulation::on_gpu;
using cuda_emulation::pool_view;
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::GlaDeviceCase;
using testing::GlaFamily;
using testing::GlaInputs;
using testing::HostTensor;

// Whether `call` throws an ArgumentError that names `name` (the refusal tests of each family).
bool refused(const std::function<void()>& call, const std::string& name) {
  try {
    call();
  } catch (const ArgumentError& e) {
    return std::string(e.what()).find(name) != std::string::npos;
  }
  return false;
}

// ---- Delta family (Gated DeltaNet, KDA): delta_recurrent_kernel.cuh ----

// One decode step of index.size() sequences (HV = 2H) on pool slots `index` of a slab of `slots`.
void check_delta(DeltaGate gate, int64_t K, int64_t V, const std::vector<int32_t>& index, int64_t slots,
                 DType dtype, uint64_t seed) {
  const int64_t N = int64_t(index.size()), H = 1, HV = 2;
  SCOPED_TRACE("gate=" + std::to_string(int(gate)) + " K=" + std::to_string(K) + " V=" + std::to_string(V) +
               " N=" + std::to_string(N) + " " + dtype_name(dtype));
  DeltaCase c;
  c.B = N, c.T = 1, c.H = H, c.HV = HV, c.K = K, c.V = V, c.gate = gate, c.initial_state = true, c.l2norm = true;
  c.dtype = dtype;
  const DeltaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {N, 1, HV, V}, 0, 0.f), s_ref(DType::f32, {N, HV, K, V}, 0, 0.f);
  (gate == DeltaGate::head ? gated_delta_rule_reference : kda_reference)(in.args(c, o_ref, &s_ref));

  Pool pool(slots, 7, HV * K * V, 5, seed + 100);
  const Indices idx(index);
  const cuda_emulation::DeltaGpuInputs inputs(in);
  const DeviceTensor o(dtype, {N, 1, HV, V}, 0);  // NaN bytes
  DeltaArgs a = inputs.args(c, in, o);
  a.initial_state = a.final_state = pool_view(pool, index, in.init.view.data, {HV, K, V});
  a.ssm_state_indices = idx.data();
  const DeltaProblem p = make_delta_problem(a, gate);
  ASSERT_NO_THROW(check_cuda_delta_recurrent(p));
  cuda_delta::RecurrentLaunch l = cuda_delta::plan_delta_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());  // a padded batch: nothing uploaded
  cuda_emulation::run_delta_recurrent(l, gate, seed);
  expect_rows(index, o, o_ref, HV * V, dtype == DType::f32 ? 1e-4 : 1e-2);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Scattered, permuted slots with pads between and after them (a bucket's), V = 100 (a part-empty last slice).
TEST(EmulatedPoolStates, DeltaRecurrenceInPlace) {
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    check_delta(gate, 48, 100, {5, 0, -1, 9, 3, -1, -1, -1}, 11, DType::f32, 10 + uint64_t(gate));
    check_delta(gate, 64, 32, {2}, 3, DType::f32, 20 + uint64_t(gate));
    check_delta(gate, 40, 48, {1, -1, 4, 0}, 6, DType::bf16, 30 + uint64_t(gate));
    // Small states, four units to a CTA and two units a sequence: pads share CTAs with real rows (and the last
    // CTA's tail is empty), each pad's units idle through the barriers without touching its slot or outputs.
    check_delta(gate, 32, 32, {3, -1, -1, 1, 0}, 6, DType::f32, 40 + uint64_t(gate));
    check_delta(gate, 16, 24, {-1, 2, 0, -1, -1, 4, -1}, 5, DType::f32, 42 + uint64_t(gate));
  }
}

// What make_delta_problem refuses with pool states, by name.
TEST(EmulatedPoolStates, DeltaRefusals) {
  DeltaCase c;
  c.B = 2, c.T = 1, c.H = 1, c.HV = 2, c.K = 16, c.V = 16, c.initial_state = true;
  const DeltaInputs in(c, 3);
  HostTensor o(DType::f32, {2, 1, 2, 16}, 0, 0.f), pool(DType::f32, {4, 2, 16, 16}, 4);
  const std::vector<int32_t> index{3, 1};
  auto args = [&](bool gpu) {
    DeltaArgs a = in.args(c, o, nullptr);
    a.initial_state = a.final_state = pool.view;
    a.ssm_state_indices = index.data();
    a.check_values = false;
    if (gpu)
      for (TensorView* t : {&a.q, &a.k, &a.v, &a.g, &a.beta, &a.o, &a.initial_state, &a.final_state})
        t->device = Device::cuda();
    return a;
  };
  auto refused_args = [](const DeltaArgs& a, const std::string& name) {
    return refused([&] { make_delta_problem(a, DeltaGate::head); }, name);
  };
  EXPECT_NO_THROW(make_delta_problem(args(true), DeltaGate::head));
  EXPECT_TRUE(refused_args(args(false), "ssm_state_indices"));  // host states: the CPU entries take dense ones
  DeltaArgs a = args(true);
  a.check_values = true;
  EXPECT_TRUE(refused_args(a, "ssm_state_indices"));
  a = args(true);
  a.final_state = o.view;
  a.final_state.device = Device::cuda();
  EXPECT_TRUE(refused_args(a, "final_state"));  // not the pool updated in place
  a = args(true);
  a.initial_state.strides[0] = a.final_state.strides[0] = 2 * 16 * 16 - 1;  // rows overlapping
  EXPECT_TRUE(refused_args(a, "final_state"));
  // The chunked form takes the pool's states too (pool_state_chunk_cases.cc).
  a = args(true);
  EXPECT_NO_THROW(check_cuda_delta_chunk(make_delta_problem(a, DeltaGate::head)));
}

// ---- RWKV-7: rwkv7_recurrent_kernel.cuh ----

// One decode step of index.size() sequences of H heads on pool slots `index` of a slab of `slots`, against the CPU
// twin (recurrent_rwkv7) on the dense states.
void check_rwkv7(int64_t H, int64_t K, int64_t V, const std::vector<int32_t>& index, int64_t slots, DType dtype,
                 uint64_t seed) {
  const int64_t N = int64_t(index.size());
  testing::Rwkv7Case c;
  c.B = N, c.T = 1, c.H = H, c.K = K, c.V = V, c.dtype = dtype;
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots));
  const testing::Rwkv7Inputs in(c, seed);
  HostTensor o_ref(DType::f32, {N, 1, H, V}, 0, 0.f), s_ref(DType::f32, {N, H, K, V}, 0, 0.f);
  Rwkv7Args a = in.args(c);
  a.o = o_ref.view, a.final_state = s_ref.view;
  recurrent_rwkv7(a);

  Pool pool(slots, 3, H * K * V, 9, seed + 100);
  const Indices idx(index);
  const cuda_emulation::Rwkv7GpuInputs inputs(in);
  const DeviceTensor o(dtype, {N, 1, H, V}, 0);  // NaN bytes
  a = inputs.args(c, in, o);
  a.initial_state = a.final_state = pool_view(pool, index, in.h0.view.data, {H, K, V});
  a.ssm_state_indices = idx.data();
  const Rwkv7Problem p = make_rwkv7_problem(a);
  ASSERT_NO_THROW(check_cuda_rwkv7_recurrent(p));
  cuda_rwkv7::RecurrentLaunch l = cuda_rwkv7::plan_rwkv7_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());  // a padded batch: nothing uploaded
  cuda_emulation::run_rwkv7_recurrent(l, seed);
  expect_rows(index, o, o_ref, H * V, dtype == DType::f32 ? 1e-4 : 1e-2);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Scattered, permuted slots with pads between and after them; RWKV-7's 64 x 64 heads, and K != V off the tiles
// (a part-empty last warp and slice).
TEST(EmulatedPoolStates, Rwkv7RecurrenceInPlace) {
  check_rwkv7(2, 64, 64, {5, 0, -1, 9, 3, -1, -1, -1}, 11, DType::f32, 80);
  check_rwkv7(1, 48, 100, {2}, 3, DType::f32, 81);
  check_rwkv7(3, 40, 36, {1, -1, 4, 0}, 6, DType::bf16, 82);
  // Small states, four units to a CTA: pads share CTAs with real rows (one unit a sequence at H = 1; three at
  // H = 3, so CTAs straddle sequences), the last CTA's tail empty.
  check_rwkv7(1, 32, 32, {4, -1, 0, -1, -1, 2}, 6, DType::f32, 83);
  check_rwkv7(3, 16, 24, {-1, 1, -1, 0, 3}, 4, DType::f32, 84);
}

// What make_rwkv7_problem refuses with pool states, by name; the CPU entries take dense states.
TEST(EmulatedPoolStates, Rwkv7Refusals) {
  testing::Rwkv7Case c;
  c.B = 2, c.T = 1, c.H = 2, c.K = 16, c.V = 16;
  const testing::Rwkv7Inputs in(c, 3);
  HostTensor o(DType::f32, {2, 1, 2, 16}, 0, 0.f), pool(DType::f32, {4, 2, 16, 16}, 4);
  const std::vector<int32_t> index{3, 1};
  auto args = [&](bool gpu) {
    Rwkv7Args a = in.args(c);
    a.o = o.view;
    a.initial_state = a.final_state = pool.view;
    a.ssm_state_indices = index.data();
    if (gpu)
      for (TensorView* t : {&a.r, &a.w, &a.k, &a.v, &a.a, &a.b, &a.o, &a.initial_state, &a.final_state})
        t->device = Device::cuda();
    return a;
  };
  EXPECT_NO_THROW(make_rwkv7_problem(args(true)));
  EXPECT_TRUE(refused([&] { recurrent_rwkv7(args(false)); }, "ssm_state_indices"));
  EXPECT_TRUE(refused([&] { chunk_rwkv7(args(false)); }, "ssm_state_indices"));
  EXPECT_TRUE(refused([&] { rwkv7_reference(args(false)); }, "ssm_state_indices"));
  Rwkv7Args a = args(true);
  a.final_state = o.view;
  a.final_state.device = Device::cuda();
  EXPECT_TRUE(refused([&] { make_rwkv7_problem(a); }, "final_state"));  // not the pool updated in place
  a = args(true);
  a.initial_state.strides[0] = a.final_state.strides[0] = 2 * 16 * 16 - 1;  // rows overlapping
  EXPECT_TRUE(refused([&] { make_rwkv7_problem(a); }, "final_state"));
}

// ---- Gated linear recurrence (MiniMax's lightning attention, simple GLA, GLA): gla_recurrent_kernel.cuh ----

// One decode step of index.size() sequences of family case `shape` (B, T = 1 set here) on pool slots `index` of
// a slab of `slots`, every tensor (a device g_gamma included, as the runner's) on the device.
void check_gla(GlaDeviceCase c, const std::vector<int32_t>& index, int64_t slots, uint64_t seed) {
  const int64_t N = int64_t(index.size());
  c.B = N, c.T = 1, c.initial_state = true;
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots));
  const GlaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {N, 1, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f);
  testing::run_gla_entry(c.family, GlaPath::reference, in.args(c, o_ref, &s_ref));

  Pool pool(slots, 5, c.HV * c.K * c.V, 11, seed + 100);
  const Indices idx(index);
  const cuda_emulation::GlaGpuInputs inputs(in);
  const DeviceTensor o(c.out_dtype, {N, 1, c.HV, c.V}, 0);  // NaN bytes
  testing::GlaEntryArgs a = inputs.args(c, in, o);
  a.opts.initial_state = a.opts.final_state = pool_view(pool, index, in.init.view.data, {c.HV, c.K, c.V});
  a.opts.ssm_state_indices = idx.data();
  std::vector<float> retention_gamma;
  const GlaProblem p = testing::gla_family_problem(c.family, a, retention_gamma);
  ASSERT_NO_THROW(check_cuda_gla_recurrent(p));
  cuda_gla::RecurrentLaunch l = cuda_gla::plan_gla_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());  // a padded batch: no offsets to upload
  // Retention's host decays are the launcher's one upload (the runner's lightning passes a device g_gamma).
  cuda_emulation::run_gla_recurrent(l, seed);
  expect_rows(index, o, o_ref, c.HV * c.V, c.out_dtype == DType::f32 ? 1e-4 : 1e-2);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Every family but the normalised linear attention (its z is not pool-addressed), scattered permuted slots with
// pads between and after them; V = 100 (a part-empty last slice), K = 96 (three warps), HV = 2H, bf16 in and out.
TEST(EmulatedPoolStates, GlaRecurrenceInPlace) {
  auto shape = [](int64_t H, int64_t HV, int64_t K, int64_t V, DType dtype) {
    GlaDeviceCase c;
    c.H = H, c.HV = HV, c.K = K, c.V = V, c.dtype = c.out_dtype = dtype;
    return c;
  };
  uint64_t seed = 80;
  const std::vector<testing::GlaLinearVariant> unnormalised{{FeatureMap::relu, false}};
  for (const GlaDeviceCase& c : testing::gla_family_cases(shape(2, 2, 48, 100, DType::f32), unnormalised))
    check_gla(c, {5, 0, -1, 9, 3, -1, -1, -1}, 11, seed++);
  for (const GlaDeviceCase& c : testing::gla_family_cases(shape(1, 2, 96, 32, DType::bf16), {}))
    check_gla(c, {1, -1, 4, 0}, 6, seed++);
  // MiniMax's lightning attention: g_gamma alone, K = V = head_dim, one sequence in the pool's only slot.
  GlaDeviceCase lightning = shape(4, 4, 64, 64, DType::f32);
  lightning.family = GlaFamily::simple_gla, lightning.g_gamma = true, lightning.data_gate = false;
  check_gla(lightning, {0}, 1, seed++);
  check_gla(lightning, {2, -1}, 3, seed++);
  // Small states, four units to a CTA and two units a sequence: pads share CTAs with real rows.
  for (const GlaDeviceCase& c : testing::gla_family_cases(shape(1, 2, 32, 32, DType::f32), unnormalised))
    check_gla(c, {3, -1, -1, 1, 0}, 6, seed++);
}

// What make_gla_problem and the entries refuse with pool states, by name.
TEST(EmulatedPoolStates, GlaRefusals) {
  GlaDeviceCase c;
  c.family = GlaFamily::simple_gla, c.B = 2, c.T = 1, c.H = 1, c.HV = 1, c.K = 16, c.V = 16, c.initial_state = true;
  const GlaInputs in(c, 3);
  HostTensor o(DType::f32, {2, 1, 1, 16}, 0, 0.f), pool(DType::f32, {4, 1, 16, 16}, 4);
  const std::vector<int32_t> index{3, 1};
  auto args = [&](bool gpu) {
    testing::GlaEntryArgs a = in.args(c, o, nullptr);
    a.opts.initial_state = a.opts.final_state = pool.view;
    a.opts.ssm_state_indices = index.data();
    if (gpu)
      for (TensorView* t : {&a.q, &a.k, &a.v, &a.g, &a.o, &a.opts.initial_state, &a.opts.final_state})
        t->device = Device::cuda();
    return a;
  };
  auto problem = [](const testing::GlaEntryArgs& a) {
    return make_gla_problem(a.q, a.k, a.v, a.g, GateKind::scalar, TensorView{}, a.o, a.opts);
  };
  EXPECT_NO_THROW(problem(args(true)));
  // Host states: the CPU entries take dense ones.
  EXPECT_TRUE(refused([&] { recurrent_simple_gla(in.q.view, in.k.view, in.v.view, in.g.view, TensorView{}, o.view,
                                                 args(false).opts); }, "ssm_state_indices"));
  testing::GlaEntryArgs a = args(true);
  a.opts.final_state = o.view;
  a.opts.final_state.device = Device::cuda();
  EXPECT_TRUE(refused([&] { problem(a); }, "final_state"));  // not the pool updated in place
  a = args(true);
  a.opts.initial_state.strides[0] = a.opts.final_state.strides[0] = 16 * 16 - 1;  // rows overlapping
  EXPECT_TRUE(refused([&] { problem(a); }, "final_state"));
  // The reference takes dense states (the chunked form the pool's, pool_state_chunk_cases.cc); the normaliser's
  // z is not addressed.
  a = args(true);
  EXPECT_NO_THROW(check_cuda_gla_chunk(problem(a)));
  EXPECT_TRUE(refused([&] { run_gla(problem(a), GlaPath::reference, "simple_gla_reference"); }, "ssm_state_indices"));
  EXPECT_TRUE(refused(
      [&] {
        GlaProblem p = make_gla_problem(a.q, a.k, a.v, TensorView{}, GateKind::none, TensorView{}, a.o, a.opts);
        set_gla_normalizer(p, TensorView{}, TensorView{});
      },
      "ssm_state_indices"));
}

}  // namespace
}  // namespace attnzoo
