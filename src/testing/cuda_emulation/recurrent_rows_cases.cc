// The recurrences' rows per thread (recurrent_split.h: 16 at K <= 16, 32 above) under the CTA emulator, for each of
// delta_recurrent_kernel.cuh (DeltaNet, Gated DeltaNet, KDA), gla_recurrent_kernel.cuh (GLA, simple GLA, retention,
// linear attention) and rwkv7_recurrent_kernel.cuh. One ragged packed prefill (a one-token and an empty sequence among
// them) of three heads, V = 72 (three slices, the last part-empty: nine units a sequence, so at K <= 64 CTAs straddle
// sequences) and K in {12, 16, 32, 64, 128}, run three ways: on dense states against the double reference; at K <= 16
// through the 32-row instantiation on the same plan, which must agree bit for bit (its extra rows are zeros, each
// adding exactly 0 to every sum); and on scattered pool slots with pads (index -1) mixed in, sharing CTAs with real
// sequences, against the dense run bit for bit, every byte of the pads' outputs and slots (and of the slab around the
// named states) untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_launch.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/delta_recurrent_stages.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/gla_recurrent_stages.h"
#include "testing/cuda_emulation/gpu_inputs.h"
#include "testing/cuda_emulation/pool_states.h"
#include "testing/cuda_emulation/run_outputs.h"
#include "testing/cuda_emulation/rwkv7_recurrent_stages.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceTensor;
using cuda_emulation::Indices;
using cuda_emulation::Pool;
using cuda_emulation::on_gpu;
using cuda_emulation::pool_view;
using cuda_linear::rows_per_thread;
using testing::HostTensor;

// Plans a family's problem on output `o`, states `initial` / `final_state` (pool slots when `indices`) and
// launches it with the plan's packing but `rows` rows per thread, the CTAs' schedule from `seed`.
using Run = std::function<void(const DeviceTensor& o, TensorView initial, TensorView final_state,
                               const int32_t* indices, int rows, uint64_t seed)>;

// What a family's case hands the three runs: its shapes (o [1, T, heads, V], states [N, heads, K, V]), its
// inputs' initial states and the reference's results.
struct Expected {
  int64_t T, N, heads, K, V;
  DType out_dtype;
  const HostTensor *init, *o_ref, *s_ref;
  double tolerance;  // o against the reference
};

void check_three_ways(const Run& run, const Expected& e, const std::vector<int32_t>& cu_seqlens,
                      const std::vector<int32_t>& index, int64_t slots, uint64_t seed) {
  // Dense, at the plan's rows, against the double reference.
  cuda_emulation::RunOutputs dense(e.out_dtype, {1, e.T, e.heads, e.V}, {e.N, e.heads, e.K, e.V}, *e.init, true,
                                   false);
  const DeviceTensor &init = dense.init, &od = dense.od, &sd = dense.sd;
  run(od, on_gpu(init.device_view()), on_gpu(sd.device_view()), nullptr, rows_per_thread(e.K), seed);
  dense.download();
  EXPECT_LE(testing::relative_rms(dense.o, *e.o_ref), e.tolerance);
  EXPECT_LE(testing::relative_rms(dense.s, *e.s_ref), 1e-4);

  // The other instantiation on the same plan, where the plan's units fit it (K <= 16: one warp either way).
  if (rows_per_thread(e.K) == 16) {
    const DeviceTensor o32(e.out_dtype, {1, e.T, e.heads, e.V}, 0), s32(DType::f32, {e.N, e.heads, e.K, e.V}, 0);
    run(o32, on_gpu(init.device_view()), on_gpu(s32.device_view()), nullptr, 32, seed + 1);
    EXPECT_EQ(std::memcmp(o32.device.data(), od.device.data(), o32.device.size()), 0) << "o, 32 rows vs 16";
    EXPECT_EQ(std::memcmp(s32.device.data(), sd.device.data(), s32.device.size()), 0) << "state, 32 rows vs 16";
  }

  // Pool slots with pads, against the dense run.
  Pool pool(slots, 5, e.heads * e.K * e.V, 3, seed + 100);
  const TensorView states = pool_view(pool, index, e.init->view.data, {e.heads, e.K, e.V});
  const Indices idx(index);
  const DeviceTensor op(e.out_dtype, {1, e.T, e.heads, e.V}, 0);  // NaN bytes
  run(op, states, states, idx.data(), rows_per_thread(e.K), seed + 2);
  cuda_emulation::expect_sequence_rows(index, cu_seqlens, op, od, e.heads * e.V);
  pool.expect(index, reinterpret_cast<const float*>(sd.device.data()), 0.0);
}

// Sequences of 1, 6, 0, 4 and 3 tokens on slots 4, pad, 0, 2, pad of a 6-slot slab.
const std::vector<int32_t> kCuSeqlens{0, 1, 7, 7, 11, 14}, kIndex{4, -1, 0, 2, -1};
constexpr int64_t kSlots = 6, kHeads = 3, kV = 72;
const int64_t kKs[] = {12, 16, 32, 64, 128};

// The plan `l` for K-row states, its rows per thread (the plan's choice, checked) replaced by `rows`.
template <class RecurrentLaunch>
void set_rows(RecurrentLaunch& l, int64_t K, int rows) {
  EXPECT_EQ(l.params.rows, rows_per_thread(K)) << "the plan's rows per thread";
  l.params.rows = rows;
}

// ---- delta_recurrent_kernel.cuh ----

void check_delta(DeltaGate gate, int64_t K, uint64_t seed) {
  testing::DeltaCase c;
  c.B = 1, c.T = kCuSeqlens.back(), c.H = 1, c.HV = kHeads, c.K = K, c.V = kV, c.gate = gate, c.initial_state = true;
  c.l2norm = true, c.cu_seqlens = kCuSeqlens;
  SCOPED_TRACE(c.label() + " gate=" + std::to_string(int(gate)));
  const testing::DeltaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {1, c.T, c.HV, kV}, 0, 0.f), s_ref(DType::f32, {in.N, c.HV, K, kV}, 0, 0.f);
  const auto reference = gate == DeltaGate::none ? delta_rule_reference
                         : gate == DeltaGate::head ? gated_delta_rule_reference
                                                   : kda_reference;
  reference(in.args(c, o_ref, &s_ref));
  const cuda_emulation::DeltaGpuInputs inputs(in);
  const Run run = [&](const DeviceTensor& o, TensorView initial, TensorView final_state, const int32_t* indices,
                      int rows, uint64_t run_seed) {
    DeltaArgs a = inputs.args(c, in, o);
    a.initial_state = initial, a.final_state = final_state, a.ssm_state_indices = indices;
    const DeltaProblem p = make_delta_problem(a, gate);
    ASSERT_NO_THROW(check_cuda_delta_recurrent(p));
    cuda_delta::RecurrentLaunch l = cuda_delta::plan_delta_recurrent(p);
    ASSERT_FALSE(l.empty);
    set_rows(l, K, rows);
    cuda_emulation::run_delta_recurrent(l, gate, run_seed);
  };
  check_three_ways(run, {c.T, in.N, c.HV, K, kV, DType::f32, &in.init, &o_ref, &s_ref, 1e-4},
                   kCuSeqlens, kIndex, kSlots, seed);
}

TEST(EmulatedRecurrentRows, Delta) {
  uint64_t seed = 900;
  for (int64_t K : kKs)
    for (DeltaGate gate : {DeltaGate::none, DeltaGate::head, DeltaGate::channel}) check_delta(gate, K, seed++);
}

// ---- gla_recurrent_kernel.cuh ----

void check_gla(testing::GlaDeviceCase c, uint64_t seed) {
  SCOPED_TRACE(c.label());
  const testing::GlaInputs in(c, seed);
  const int64_t N = c.num_seqs();
  HostTensor o_ref(DType::f32, {1, c.T, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f);
  testing::run_gla_entry(c.family, GlaPath::reference, in.args(c, o_ref, &s_ref));
  const cuda_emulation::GlaGpuInputs inputs(in);
  const Run run = [&](const DeviceTensor& o, TensorView initial, TensorView final_state, const int32_t* indices,
                      int rows, uint64_t run_seed) {
    testing::GlaEntryArgs a = inputs.args(c, in, o);
    a.opts.initial_state = initial, a.opts.final_state = final_state, a.opts.ssm_state_indices = indices;
    std::vector<float> retention_gamma;
    const GlaProblem p = testing::gla_family_problem(c.family, a, retention_gamma);
    ASSERT_NO_THROW(check_cuda_gla_recurrent(p));
    cuda_gla::RecurrentLaunch l = cuda_gla::plan_gla_recurrent(p);
    ASSERT_FALSE(l.empty);
    set_rows(l, c.K, rows);
    cuda_emulation::run_gla_recurrent(l, run_seed);  // with retention's host decays, the launcher's other upload
  };
  check_three_ways(run, {c.T, N, c.HV, c.K, c.V, DType::f32, &in.init, &o_ref, &s_ref, 1e-4}, kCuSeqlens, kIndex,
                   kSlots, seed);
}

// Every family but the normalised linear attention (its z is not pool-addressed); HV = 3H.
TEST(EmulatedRecurrentRows, Gla) {
  uint64_t seed = 950;
  for (int64_t K : kKs) {
    testing::GlaDeviceCase shape;
    shape.B = 1, shape.T = kCuSeqlens.back(), shape.H = 1, shape.HV = kHeads, shape.K = K, shape.V = kV;
    shape.cu_seqlens = kCuSeqlens, shape.initial_state = true;
    for (const testing::GlaDeviceCase& c : testing::gla_family_cases(shape, {{FeatureMap::relu, false}}))
      check_gla(c, seed++);
  }
}

// ---- rwkv7_recurrent_kernel.cuh ----

void check_rwkv7(int64_t K, uint64_t seed) {
  testing::Rwkv7Case c;
  c.B = 1, c.T = kCuSeqlens.back(), c.H = kHeads, c.K = K, c.V = kV, c.cu_seqlens = kCuSeqlens;
  SCOPED_TRACE(c.label());
  const testing::Rwkv7Inputs in(c, seed);
  const testing::Rwkv7Outputs ref = testing::rwkv7_reference_outputs(c, in);
  const cuda_emulation::Rwkv7GpuInputs inputs(in);
  const Run run = [&](const DeviceTensor& o, TensorView initial, TensorView final_state, const int32_t* indices,
                      int rows, uint64_t run_seed) {
    Rwkv7Args a = inputs.args(c, in, o);
    a.initial_state = initial, a.final_state = final_state, a.ssm_state_indices = indices;
    const Rwkv7Problem p = make_rwkv7_problem(a);
    ASSERT_NO_THROW(check_cuda_rwkv7_recurrent(p));
    cuda_rwkv7::RecurrentLaunch l = cuda_rwkv7::plan_rwkv7_recurrent(p);
    ASSERT_FALSE(l.empty);
    set_rows(l, K, rows);
    cuda_emulation::run_rwkv7_recurrent(l, run_seed);
  };
  check_three_ways(run, {c.T, c.nseq(), c.H, K, kV, DType::f32, &in.h0, &ref.o, &ref.s, 1e-4}, kCuSeqlens, kIndex,
                   kSlots, seed);
}

TEST(EmulatedRecurrentRows, Rwkv7) {
  uint64_t seed = 990;
  for (int64_t K : kKs) check_rwkv7(K, seed++);
}

// The plan's choice (recurrent_split.h): 16 rows only where a unit is one warp either way, so the packing is the
// same and the 16-row kernel's bound (four one-warp units, 128 threads) holds.
TEST(CudaRecurrentSplit, PicksRowsPerThread) {
  using cuda_linear::recurrent_grid;
  for (int64_t K : {1, 15, 16}) {
    EXPECT_EQ(rows_per_thread(K), 16) << K;
    EXPECT_EQ(cuda_linear::unit_warps(K), 1) << K;
    EXPECT_EQ(recurrent_grid(9, K).rows, 16) << K;
    EXPECT_EQ(recurrent_grid(9, K).threads, 128) << K;
    EXPECT_EQ(recurrent_grid(9, K).units, 4) << K;
    EXPECT_LE(recurrent_grid(9, K).threads, cuda_linear::bound_threads(16)) << K;
  }
  for (int64_t K : {17, 32, 33, 64, 100, 128, 256}) {
    EXPECT_EQ(rows_per_thread(K), 32) << K;
    EXPECT_EQ(cuda_linear::unit_warps(K), (K + 31) / 32) << K;
    EXPECT_EQ(recurrent_grid(9, K).rows, 32) << K;
    EXPECT_LE(recurrent_grid(9, K).threads, cuda_linear::bound_threads(32)) << K;
  }
}

}  // namespace
}  // namespace attnzoo
