// The CUDA delta-family recurrence: what it refuses (checked on the host, no GPU needed), and, on a GPU, its
// outputs and final states against the double-precision reference run on the same host data, through the
// public recurrent entries (so the device branch, the deferred value scans and the launch are all exercised).
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
#include "kernels/linear/common/cuda/delta_gpu_run.h"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "testing/device_test_util.h"
#include "testing/pool_slots_testing.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::HostTensor;
using testing::OnDevice;

#if ATTNZOO_WITH_CUDA

using Entry = void (*)(const DeltaArgs&);
Entry recurrent(DeltaGate gate) {
  return gate == DeltaGate::none ? recurrent_delta_rule
                                 : gate == DeltaGate::head ? recurrent_gated_delta_rule : recurrent_kda;
}
Entry reference(DeltaGate gate) {
  return gate == DeltaGate::none ? delta_rule_reference
                                 : gate == DeltaGate::head ? gated_delta_rule_reference : kda_reference;
}

TEST(CudaDeltaRecurrent, RefusesWhatItDoesNotDo) {
  auto problem = [](int64_t K, DType dtype = DType::f32) {
    static std::vector<std::unique_ptr<DeltaInputs>> keep;  // the problem points into them
    static std::vector<std::unique_ptr<HostTensor>> outs;
    const DeltaCase c{.B = 1, .T = 2, .H = 1, .HV = 2, .K = K, .V = 16, .gate = DeltaGate::head,
                      .initial_state = true, .dtype = dtype};
    keep.push_back(std::make_unique<DeltaInputs>(c));
    outs.push_back(std::make_unique<HostTensor>(DType::f32, std::vector<int64_t>{1, 2, 2, 16}, 0, 0.f));
    return make_delta_problem(keep.back()->args(c, *outs.back(), nullptr), DeltaGate::head);
  };
  EXPECT_NO_THROW(check_cuda_delta_recurrent(problem(256)));
  EXPECT_NO_THROW(check_cuda_delta_recurrent(problem(100, DType::bf16)));
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_recurrent(problem(257)); }, "q: K=257 exceeds 256");

  // Element-misaligned data (a view one byte into a buffer) is named.
  DeltaProblem p = problem(64);
  p.v.data = static_cast<char*>(p.v.data) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_recurrent(p); }, "v: data must be aligned");
  p = problem(64, DType::bf16);
  p.beta.data = static_cast<char*>(p.beta.data) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_recurrent(p); }, "beta: data must be aligned");
  p = problem(64);
  p.initial_state = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.initial_state) + 2);
  testing::expect_error<ArgumentError>([&] { check_cuda_delta_recurrent(p); }, "initial_state: data must be");
}

// Relative RMS error allowed. The kernel and the reference read the same (already rounded) inputs, so with an
// f32 output only f32 arithmetic separates them: a few ulps per step, carried through the state across at most a
// few dozen tokens (the CPU kernels' bound, 1e-4, holds with room). A bf16 output adds its rounding (2^-9
// relative at worst, about 2^-10 in RMS), as the CPU tests allow.
double tolerance(const DeltaCase& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// Runs case `c` on the GPU (final state updated in place when `in_place`; otherwise into a separate buffer that
// starts as NaN bytes, so an element the kernel forgets fails) and compares with the reference.
void check_case(const DeltaCase& c, bool in_place, uint64_t seed = 1) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const DeltaInputs in(c, seed);
  const testing::DeltaOutputs ref = testing::delta_host_outputs(c, in, reference(c.gate)),
                              gpu = testing::delta_gpu_outputs(c, in, in_place, recurrent(c.gate));
  EXPECT_LE(testing::relative_rms(gpu.o, ref.o), tolerance(c));
  EXPECT_LE(testing::relative_rms(gpu.s, ref.s), 1e-4);
}

const DeltaGate kGates[] = {DeltaGate::none, DeltaGate::head, DeltaGate::channel};

// One decode step of an engine-shaped batch (fla's benchmark shape at B = 32 is this with more sequences).
TEST(CudaDeltaRecurrent, MatchesDecodeStep) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates) {
    check_case({.B = 8, .T = 1, .H = 4, .HV = 8, .K = 128, .V = 128, .gate = gate, .initial_state = true}, true);
    check_case({.B = 3, .T = 1, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .initial_state = true}, false);
  }
}

// Packed sequences of 1, 7 and 33 tokens (and an empty one: its final state is its initial state), GQA-style
// HV = 2H, a V that leaves the last 32-column slice part empty and a K that leaves the last warp part empty.
TEST(CudaDeltaRecurrent, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates)
    for (bool in_place : {true, false}) {
      check_case({.T = 41, .H = 2, .HV = 4, .K = 64, .V = 80, .gate = gate, .initial_state = true,
                  .cu_seqlens = {0, 1, 8, 8, 41}},
                 in_place);
      check_case({.T = 41, .H = 1, .HV = 2, .K = 100, .V = 60, .gate = gate, .initial_state = true,
                  .cu_seqlens = {0, 33, 34, 41}},
                 in_place, 2);
    }
}

// Small states pack several units to a CTA (recurrent_split.h): issue 26's decode step (B = 32, H = 40, K = V =
// 64: two units a CTA), and K = 16 (four) with ragged sequences of 1, 7, 0 and 33 tokens sharing CTAs (HV = 3,
// one slice: three units a sequence).
TEST(CudaDeltaRecurrent, MatchesPackedSmallStates) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates) {
    check_case({.B = 32, .T = 1, .H = 40, .HV = 40, .K = 64, .V = 64, .gate = gate, .initial_state = true}, true);
    check_case({.T = 41, .H = 1, .HV = 3, .K = 16, .V = 32, .gate = gate, .initial_state = true,
                .cu_seqlens = {0, 1, 8, 8, 41}},
               false);
  }
}

TEST(CudaDeltaRecurrent, MatchesPaddedBatchesAndHeadDims) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates) {
    check_case({.B = 2, .T = 7, .H = 1, .HV = 2, .K = 256, .V = 64, .gate = gate, .initial_state = true}, true);
    check_case({.B = 2, .T = 9, .H = 2, .HV = 2, .K = 16, .V = 8, .gate = gate, .initial_state = true}, false);
    check_case({.B = 2, .T = 33, .H = 1, .HV = 3, .K = 32, .V = 33, .gate = gate}, false);  // zero initial state
  }
}

TEST(CudaDeltaRecurrent, MatchesDecayStrengths) {
  REQUIRE_GPU();
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    // Strong: log gates around -20 wipe the state each token (exp(-20) ~ 2e-9, no subnormals in f32).
    check_case({.T = 33, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .g_min = -21.f, .g_max = -19.f,
                .initial_state = true},
               true);
    check_case({.T = 33, .H = 2, .HV = 4, .K = 64, .V = 64, .gate = gate, .g_min = -0.05f, .g_max = 0.f,
                .initial_state = true},
               true);
    check_case({.T = 33, .H = 2, .HV = 4, .K = 64, .V = 64, .gate = gate, .g_min = -20.f, .g_max = 0.f,
                .initial_state = true, .cu_seqlens = {0, 1, 8, 33}},
               false);
  }
}

TEST(CudaDeltaRecurrent, MatchesDtypesAndL2Norm) {
  REQUIRE_GPU();
  for (DeltaGate gate : kGates) {
    DeltaCase c{.T = 7, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .initial_state = true,
                .dtype = DType::bf16};
    check_case(c, true);
    c.out_dtype = DType::bf16;
    check_case(c, true);
    c.dtype = DType::f16;
    c.out_dtype = DType::f16;
    check_case(c, false);
    c = {.T = 7, .H = 2, .HV = 4, .K = 128, .V = 128, .gate = gate, .initial_state = true, .l2norm = true};
    check_case(c, true);
    c.dtype = DType::bf16;
    c.cu_seqlens = {0, 1, 7};
    check_case(c, false);
  }
}

// check_values (the default) scans the device tensors on the device with the host scan's wording; false skips it.
TEST(CudaDeltaRecurrent, ScansValuesOnTheDevice) {
  REQUIRE_GPU();
  const DeltaCase c{.B = 1, .T = 4, .H = 1, .HV = 2, .K = 32, .V = 32, .gate = DeltaGate::head,
                    .initial_state = true};
  DeltaInputs in(c);
  store_from_f32(in.g.view.data, DType::f32, 5, 0.5f);
  store_from_f32(in.q.view.data, DType::f32, 70, NAN);
  HostTensor o(DType::f32, {1, 4, 2, 32}, 0, 0.f), s(DType::f32, {1, 2, 32, 32}, 0, 0.f);
  const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), beta(in.beta), init(in.init), od(o), sd(s);
  DeltaArgs a = in.args(c, o, &s);
  a.q = q.view, a.k = k.view, a.v = v.view, a.g = g.view, a.beta = beta.view, a.o = od.view;
  a.initial_state = init.view, a.final_state = sd.view;
  testing::expect_error<ArgumentError>([&] { recurrent_gated_delta_rule(a); },
                                       "q: contains NaN or Inf (flat index 70)");
  a.q = k.view;
  testing::expect_error<ArgumentError>([&] { recurrent_gated_delta_rule(a); },
                                       "g: log decays must be <= 0, found 0.500000 at flat index 5");
  a.check_values = false;
  EXPECT_NO_THROW(recurrent_gated_delta_rule(a));
  synchronize(current_stream());
}

// One decode step on states in a pool (ssm_state_indices, the GPU runner's decode): scattered, permuted slots of a
// slab whose rows hold more than the state, and pads (-1), against the reference on the same states gathered
// (testing/pool_slots_testing.h's checks: nothing else of the slab touched, the pads' outputs unwritten).
TEST(CudaDeltaRecurrent, MatchesDecodeStepOnPoolSlots) {
  REQUIRE_GPU();
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    testing::PoolSlots pool({6, 0, -1, 3, 9, -1, -1, -1}, 10, 24, 4 * 128 * 96, 8, 8);
    const int64_t N = pool.count();
    const DeltaCase c{.B = N, .T = 1, .H = 2, .HV = 4, .K = 128, .V = 96, .gate = gate, .initial_state = true,
                      .l2norm = true};
    SCOPED_TRACE(c.label());
    const DeltaInputs in(c, 7);
    HostTensor o_ref(DType::f32, {N, 1, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f);
    reference(gate)(in.args(c, o_ref, &s_ref));
    pool.place(in.init.view.ptr<float>());

    HostTensor o(DType::f32, {N, 1, c.HV, c.V}, 0, 0.f);
    testing::fill_nan_bytes(o);
    const std::vector<int32_t>& index = pool.index;
    DeviceBuffer idx(Device::cuda(), index.size() * sizeof(int32_t));
    idx.upload(index.data(), index.size() * sizeof(int32_t));
    const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), beta(in.beta), od(o), slab(pool.slab);
    DeltaArgs a = in.args(c, o, nullptr);
    a.q = q.view, a.k = k.view, a.v = v.view, a.g = g.view, a.beta = beta.view, a.o = od.view;
    a.initial_state = a.final_state = pool.rows(slab.buffer.data(), {c.HV, c.K, c.V});
    a.ssm_state_indices = idx.as<int32_t>();
    a.check_values = false;
    recurrent(gate)(a);
    synchronize(current_stream());
    od.download(o);
    slab.download(pool.slab);
    pool.expect_outputs(o, o_ref, c.HV * c.V, tolerance(c));
    pool.expect_states(s_ref.view.ptr<float>(), 1e-4);
  }
}

#else

TEST(CudaDeltaRecurrent, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
