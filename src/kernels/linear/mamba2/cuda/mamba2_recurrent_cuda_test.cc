// The CUDA Mamba-2 recurrence: what it refuses (checked on the host, no GPU needed), and, on a GPU, its outputs
// and final states against the double-precision reference run on the same host data, through the public
// entries (mamba2_recurrent, mamba2_state_update), so the device branch and the launch are both exercised.
// Compiled by g++ in every CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "kernels/linear/mamba2/cuda/mamba2_gpu_run.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "testing/test_util.h"
#include "testing/device_test_util.h"
#include "testing/pool_slots_testing.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::OnDevice;
using Case = testing::Mamba2DeviceCase;
using Inputs = testing::Mamba2DeviceInputs;

#if ATTNZOO_WITH_CUDA

TEST(CudaMamba2Recurrent, RefusesWhatItDoesNotDo) {
  auto check = [](const Case& c, auto&& edit) { testing::check_mamba2_problem(c, edit, check_cuda_mamba2_recurrent); };
  auto nothing = [](Mamba2Problem&) {};
  EXPECT_NO_THROW(check({.N = 256}, nothing));
  EXPECT_NO_THROW(check({.N = 100, .dtype = DType::bf16}, nothing));
  testing::expect_error<ArgumentError>([&] { check({.N = 257}, nothing); }, "B: state size N=257 exceeds 256");
  // Element-misaligned data (a view one byte into a buffer) is named.
  testing::expect_error<ArgumentError>(
      [&] { check({.dtype = DType::bf16}, [](Mamba2Problem& p) { p.Cm = static_cast<const char*>(p.Cm) + 1; }); },
      "C: data must be aligned");
  testing::expect_error<ArgumentError>(
      [&] { check({}, [](Mamba2Problem& p) { p.dt_in.data = static_cast<char*>(p.dt_in.data) + 2; }); },
      "dt: data must be aligned");
  testing::expect_error<ArgumentError>(
      [&] {
        check({}, [](Mamba2Problem& p) {
          p.h0 = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.h0) + 2);
        });
      },
      "initial_state: data must be aligned");
}

// Relative RMS error allowed: the kernel and the reference read the same (already rounded) inputs, so with an
// f32 output only f32 arithmetic (and the device's expf / log1pf, a few ulps) separates them; a bf16 output adds
// its rounding, as the CPU tests allow.
double tolerance(const Case& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// Runs case `c` through mamba2_recurrent on the GPU (final state in place over the initial one when
// `in_place`; otherwise into a separate buffer that starts as NaN bytes, so an element the kernel forgets fails)
// and compares with the reference.
void check_recurrent(const Case& c, bool in_place) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const Inputs in(c);
  const testing::Mamba2Outputs ref = testing::mamba2_host_outputs(c, in, mamba2_reference),
                               gpu = testing::mamba2_gpu_outputs(c, in, in_place, mamba2_recurrent);
  EXPECT_LE(testing::relative_rms(gpu.y, ref.y), tolerance(c));
  EXPECT_LE(testing::relative_rms(gpu.s, ref.s), 1e-4);
}

// [Bn, 1, ...] -> [Bn, ...]: the decode entry's shapes.
TensorView drop_time(TensorView v) {
  for (int d = 1; d + 1 < v.ndim; ++d)
    v.shape[size_t(d)] = v.shape[size_t(d + 1)], v.strides[size_t(d)] = v.strides[size_t(d + 1)];
  --v.ndim;
  return v;
}

// The decode entry (case `c` with T = 1), state updated in place, against the step reference.
void check_step(const Case& c) {
  SCOPED_TRACE(c.label() + " step");
  ASSERT_EQ(c.T, 1);
  const Inputs in(c);
  const Mamba2Args full = in.args(c);
  auto step = [&](const TensorView& x, const TensorView& dt, const TensorView& A, const TensorView& B,
                  const TensorView& C, const TensorView& D, const TensorView& z, const TensorView& bias) {
    Mamba2StepArgs a;
    a.x = drop_time(x), a.dt = drop_time(dt), a.A = A, a.B = drop_time(B), a.C = drop_time(C);
    if (c.with_D) a.D = D;
    if (c.with_z) a.z = drop_time(z);
    if (c.with_bias) a.dt_bias = bias;
    a.dt_softplus = full.dt_softplus, a.dt_limit = full.dt_limit, a.dt_min = full.dt_min, a.dt_max = full.dt_max;
    return a;
  };
  HostTensor y_ref(DType::f32, {c.B, c.H, c.P}, 0, 0.f), s_ref = in.h0;
  Mamba2StepArgs a = step(in.x.view, in.dt.view, in.A.view, in.B.view, in.C.view, in.D.view, in.z.view, in.bias.view);
  a.state = s_ref.view, a.y = y_ref.view;
  mamba2_state_update_reference(a);

  HostTensor y(c.out_dtype, {c.B, c.H, c.P}, 0, 0.f), s = in.h0;
  const OnDevice x(in.x), dt(in.dt), A(in.A), B(in.B), C(in.C), D(in.D), z(in.z), bias(in.bias), state(in.h0),
      yd(y);
  a = step(x.view, dt.view, A.view, B.view, C.view, D.view, z.view, bias.view);
  a.state = state.view, a.y = yd.view;
  mamba2_state_update(a);
  synchronize(current_stream());
  yd.download(y);
  state.download(s);
  EXPECT_LE(testing::relative_rms(y, y_ref), tolerance(c));
  EXPECT_LE(testing::relative_rms(s, s_ref), 1e-4);
}

// Engine-shaped decode steps: Mamba-2 2.7B's heads (H = 80, P = 64, N = 128, one group) and Falcon-H1-like
// wider states (N = 256) with grouped B / C.
TEST(CudaMamba2Recurrent, MatchesDecodeStep) {
  REQUIRE_GPU();
  check_step({.B = 4, .H = 80, .P = 64, .G = 1, .N = 128});
  check_step({.B = 3, .H = 8, .P = 64, .G = 2, .N = 256, .D_per_channel = true});
  check_step({.B = 2, .H = 4, .P = 60, .G = 4, .N = 16, .with_D = false, .with_z = false, .limit = true,
              .dtype = DType::bf16});
  check_recurrent({.B = 5, .H = 8, .P = 64, .N = 128}, true);
}

// Packed sequences of 1, 7 and 33 tokens (and an empty one: its final state is its initial state), head dims
// that leave the last 16-row slice or 4-row warp part empty, state sizes that leave lanes idle.
TEST(CudaMamba2Recurrent, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (bool in_place : {true, false}) {
    check_recurrent({.T = 41, .H = 4, .P = 64, .G = 2, .N = 64, .cu = {0, 1, 8, 8, 41}}, in_place);
    check_recurrent({.T = 41, .H = 2, .P = 30, .N = 100, .cu = {0, 33, 34, 41}}, in_place);
  }
}

TEST(CudaMamba2Recurrent, MatchesPaddedBatchesAndShapes) {
  REQUIRE_GPU();
  check_recurrent({.B = 2, .T = 7, .H = 2, .P = 100, .N = 256, .D_per_channel = true}, true);
  check_recurrent({.B = 2, .T = 9, .H = 3, .P = 8, .G = 3, .N = 16, .softplus = false, .limit = true}, false);
  check_recurrent({.B = 2, .T = 33, .H = 2, .P = 64, .N = 128, .with_h0 = false}, false);  // zero initial state
  check_recurrent({.B = 1, .T = 5, .H = 1, .P = 1, .N = 1, .with_bias = false}, false);
}

// Strong decays (A dt' near -20 every token: the state is wiped and rebuilt from the last token) and mild ones
// (A dt' near -1e-3: the state carries across the whole sequence).
TEST(CudaMamba2Recurrent, MatchesDecayStrengths) {
  REQUIRE_GPU();
  check_recurrent({.T = 33, .H = 4, .P = 64, .N = 128, .A_min = -8.f, .A_max = -6.f, .dt_mean = 3.f}, true);
  check_recurrent({.T = 33, .H = 4, .P = 64, .N = 128, .A_min = -0.02f, .A_max = -0.01f, .dt_mean = -4.f}, true);
  check_recurrent({.T = 33, .H = 4, .P = 64, .N = 64, .cu = {0, 1, 8, 33}, .A_min = -8.f, .A_max = -0.01f}, false);
}

TEST(CudaMamba2Recurrent, MatchesDtypes) {
  REQUIRE_GPU();
  Case c{.T = 7, .H = 4, .P = 64, .N = 128, .dtype = DType::bf16};
  check_recurrent(c, true);
  c.out_dtype = DType::bf16;
  check_recurrent(c, true);
  c.dtype = DType::f16, c.out_dtype = DType::f16, c.cu = {0, 2, 7}, c.B = 1;
  check_recurrent(c, false);
}

// The decode step on states in a pool (state_batch_indices, the GPU runner's decode): scattered, permuted slots of
// a slab whose rows hold more than the state (a slot's conv tail before it), and pads (-1), against the reference
// on the same states gathered (testing/pool_slots_testing.h's checks: nothing else of the slab touched, the pads'
// outputs unwritten). N = 128 and 256 (Falcon-H1's).
TEST(CudaMamba2Recurrent, MatchesDecodeStepOnPoolSlots) {
  REQUIRE_GPU();
  for (int64_t N : {128, 256}) {
    const int64_t H = 8, P = 64, G = 2;
    testing::PoolSlots pool({5, -1, 0, 2, -1, -1}, 6, 40, H * P * N, 3, 9);
    const int64_t Bn = pool.count();
    SCOPED_TRACE("N=" + std::to_string(N));
    HostTensor x(DType::bf16, {Bn, H, P}, 1), dt(DType::bf16, {Bn, H}, 2), A(DType::f32, {H}, 3),
        Bm(DType::bf16, {Bn, G, N}, 4, 0.5f), Cm(DType::bf16, {Bn, G, N}, 5, 0.5f), D(DType::f32, {H}, 6),
        z(DType::bf16, {Bn, H, P}, 7), bias(DType::f32, {H}, 8, 0.5f), dense(DType::f32, {Bn, H, P, N}, 10),
        y_ref(DType::f32, {Bn, H, P}, 0, 0.f), y(DType::f32, {Bn, H, P}, 0, 0.f);
    for (int64_t h = 0; h < H; ++h) A.view.ptr<float>()[h] = -0.5f - std::fabs(A.at(h));
    pool.place(dense.view.ptr<float>());
    Mamba2StepArgs a;
    a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = D.view, a.z = z.view;
    a.dt_bias = bias.view, a.dt_softplus = true, a.state = dense.view, a.y = y_ref.view;
    mamba2_state_update_reference(a);  // dense: after
    testing::fill_nan_bytes(y);
    DeviceBuffer idx(Device::cuda(), pool.index.size() * sizeof(int32_t));
    idx.upload(pool.index.data(), pool.index.size() * sizeof(int32_t));
    const OnDevice xd(x), dtd(dt), Ad(A), Bd(Bm), Cd(Cm), Dd(D), zd(z), biasd(bias), yd(y), slab(pool.slab);
    a.x = xd.view, a.dt = dtd.view, a.A = Ad.view, a.B = Bd.view, a.C = Cd.view, a.D = Dd.view, a.z = zd.view;
    a.dt_bias = biasd.view, a.y = yd.view;
    a.state = pool.rows(slab.buffer.data(), {H, P, N});
    a.state_batch_indices = idx.as<int32_t>();
    mamba2_state_update(a);
    synchronize(current_stream());
    yd.download(y);
    slab.download(pool.slab);
    pool.expect_outputs(y, y_ref, H * P, 1e-4);
    pool.expect_states(dense.view.ptr<float>(), 1e-4);
  }
}

#else

TEST(CudaMamba2Recurrent, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
