// The CUDA selective scan: what it refuses (checked on the host, no GPU needed), and, on a GPU, its outputs and
// final states against the double-precision reference run on the same host data, through the public entries
// (selective_scan, selective_state_update), so the device branch and the launch are both exercised. Compiled by
// g++ in every CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/mamba.h"
#include "testing/test_util.h"
#include "testing/device_test_util.h"
#include "testing/pool_slots_testing.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::OnDevice;

#if ATTNZOO_WITH_CUDA

struct Case {
  int64_t B = 1, D = 64, L = 1, N = 16, G = 0;  // G = 0: B, C are [B, N, L]; else [B, G, N, L]
  float A_scale = 1.f;                          // A = -A_scale * |N(0, 1)|
  float delta_mean = 0.f;                       // delta drawn as N(delta_mean, 0.5)
  bool with_D = true, with_z = true, with_bias = true, softplus = true, with_h0 = true;
  std::vector<int32_t> cu = {};  // packed sequences; the initializer keeps -Wextra quiet where a case leaves it out
  DType dtype = DType::f32, out_dtype = DType::f32;
  int64_t nseq() const { return cu.empty() ? B : int64_t(cu.size()) - 1; }
  std::string label() const {
    return "B=" + std::to_string(B) + " D=" + std::to_string(D) + " L=" + std::to_string(L) + " N=" +
           std::to_string(N) + " G=" + std::to_string(G) + " A_scale=" + std::to_string(A_scale) + " delta_mean=" +
           std::to_string(delta_mean) + " " + dtype_name(dtype) + "->" + dtype_name(out_dtype) +
           (cu.empty() ? "" : " packed");
  }
};

struct Inputs {
  HostTensor u, delta, A, B, C, D, z, bias, h0;
  static std::vector<int64_t> bc_shape(const Case& c) {
    return c.G ? std::vector<int64_t>{c.B, c.G, c.N, c.L} : std::vector<int64_t>{c.B, c.N, c.L};
  }
  explicit Inputs(const Case& c)
      : u(c.dtype, {c.B, c.D, c.L}, 1), delta(c.dtype, {c.B, c.D, c.L}, 2, 0.5f), A(DType::f32, {c.D, c.N}, 3),
        B(c.dtype, bc_shape(c), 4, 0.5f), C(c.dtype, bc_shape(c), 5, 0.5f), D(c.dtype, {c.D}, 6),
        z(c.dtype, {c.B, c.D, c.L}, 7), bias(DType::f32, {c.D}, 8, 0.3f), h0(DType::f32, {c.nseq(), c.D, c.N}, 9) {
    for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -c.A_scale * std::fabs(A.at(i));
    for (int64_t i = 0; i < delta.numel(); ++i)
      store_from_f32(delta.view.data, delta.view.dtype, i, delta.at(i) + c.delta_mean);
  }
  SelectiveScanArgs args(const Case& c) const {
    SelectiveScanArgs a;
    a.u = u.view, a.delta = delta.view, a.A = A.view, a.B = B.view, a.C = C.view;
    if (c.with_D) a.D = D.view;
    if (c.with_z) a.z = z.view;
    if (c.with_bias) a.delta_bias = bias.view;
    a.delta_softplus = c.softplus;
    if (c.with_h0) a.initial_state = h0.view;
    if (!c.cu.empty()) a.cu_seqlens = c.cu.data(), a.cu_seqlens_len = int64_t(c.cu.size());
    return a;
  }
};

TEST(CudaSelectiveScan, RefusesWhatItDoesNotDo) {
  auto check = [](Case c, auto&& edit) {
    const Inputs in(c);
    HostTensor out(c.out_dtype, {c.B, c.D, c.L}, 0, 0.f);
    SelectiveScanArgs a = in.args(c);
    a.out = out.view;
    SelectiveScanProblem p = make_selective_scan_problem(a);
    edit(p);
    check_cuda_selective_scan(p);
  };
  auto nothing = [](SelectiveScanProblem&) {};
  Case c;
  c.N = 256;
  EXPECT_NO_THROW(check(c, nothing));
  c.N = 257;
  testing::expect_error<ArgumentError>([&] { check(c, nothing); }, "A: state size N=257 exceeds 256");
  c.N = 16, c.dtype = DType::bf16;
  testing::expect_error<ArgumentError>(
      [&] { check(c, [](SelectiveScanProblem& p) { p.u = static_cast<const char*>(p.u) + 1; }); },
      "u: data must be aligned");
  testing::expect_error<ArgumentError>(
      [&] {
        check(c, [](SelectiveScanProblem& p) { p.ht = reinterpret_cast<float*>(reinterpret_cast<char*>(p.ht) + 2); });
      },
      "final_state: data must be aligned");
}

// As the CPU tests allow: f32 arithmetic (the device's expf, a few ulps) carried through the state, or a
// 16-bit output's rounding.
double tolerance(const Case& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// Runs case `c` through selective_scan on the GPU (final state in place over the initial one when `in_place`;
// otherwise into a separate buffer that starts as NaN bytes) and compares with the reference.
void check_scan(const Case& c, bool in_place) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const Inputs in(c);
  HostTensor o_ref(DType::f32, {c.B, c.D, c.L}, 0, 0.f), s_ref(DType::f32, {c.nseq(), c.D, c.N}, 0, 0.f);
  SelectiveScanArgs a = in.args(c);
  a.out = o_ref.view, a.final_state = s_ref.view;
  selective_scan_reference(a);

  HostTensor o(c.out_dtype, {c.B, c.D, c.L}, 0, 0.f), s(DType::f32, {c.nseq(), c.D, c.N}, 0, 0.f);
  testing::fill_nan_bytes(o);
  testing::fill_nan_bytes(s);
  const OnDevice u(in.u), delta(in.delta), A(in.A), B(in.B), C(in.C), D(in.D), z(in.z), bias(in.bias), h0(in.h0),
      od(o), sd(s);
  a.u = u.view, a.delta = delta.view, a.A = A.view, a.B = B.view, a.C = C.view, a.out = od.view;
  if (c.with_D) a.D = D.view;
  if (c.with_z) a.z = z.view;
  if (c.with_bias) a.delta_bias = bias.view;
  if (c.with_h0) a.initial_state = h0.view;
  const bool aliased = in_place && c.with_h0;
  a.final_state = aliased ? h0.view : sd.view;
  selective_scan(a);
  synchronize(current_stream());
  od.download(o);
  (aliased ? h0 : sd).download(s);
  EXPECT_LE(testing::relative_rms(o, o_ref), tolerance(c));
  EXPECT_LE(testing::relative_rms(s, s_ref), 1e-4);
}

// [Bn, D, 1] -> [Bn, D] and [Bn, (G,) N, 1] -> [Bn, (G,) N]: the decode entry's shapes.
TensorView drop_len(TensorView v) {
  --v.ndim;
  return v;
}

// The decode entry (case `c` with L = 1), state updated in place, against the step reference.
void check_step(const Case& c) {
  SCOPED_TRACE(c.label() + " step");
  ASSERT_EQ(c.L, 1);
  const Inputs in(c);
  auto step = [&](const TensorView& x, const TensorView& dt, const TensorView& A, const TensorView& B,
                  const TensorView& C, const TensorView& D, const TensorView& z, const TensorView& bias) {
    SelectiveStateUpdateArgs a;
    a.x = drop_len(x), a.dt = drop_len(dt), a.A = A, a.B = drop_len(B), a.C = drop_len(C);
    if (c.with_D) a.D = D;
    if (c.with_z) a.z = drop_len(z);
    if (c.with_bias) a.dt_bias = bias;
    a.dt_softplus = c.softplus;
    return a;
  };
  HostTensor y_ref(DType::f32, {c.B, c.D}, 0, 0.f), s_ref = in.h0;
  SelectiveStateUpdateArgs a =
      step(in.u.view, in.delta.view, in.A.view, in.B.view, in.C.view, in.D.view, in.z.view, in.bias.view);
  a.state = s_ref.view, a.y = y_ref.view;
  selective_state_update_reference(a);

  HostTensor y(c.out_dtype, {c.B, c.D}, 0, 0.f), s = in.h0;
  const OnDevice u(in.u), delta(in.delta), A(in.A), B(in.B), C(in.C), D(in.D), z(in.z), bias(in.bias), state(in.h0),
      yd(y);
  a = step(u.view, delta.view, A.view, B.view, C.view, D.view, z.view, bias.view);
  a.state = state.view, a.y = yd.view;
  selective_state_update(a);
  synchronize(current_stream());
  yd.download(y);
  state.download(s);
  EXPECT_LE(testing::relative_rms(y, y_ref), tolerance(c));
  EXPECT_LE(testing::relative_rms(s, s_ref), 1e-4);
}

// Mamba-1 2.8B's decode step (D = 5120, N = 16) and the other state sizes the kernel's widths cover.
TEST(CudaSelectiveScan, MatchesDecodeStep) {
  REQUIRE_GPU();
  check_step({.B = 4, .D = 5120});
  check_step({.B = 3, .D = 100, .N = 32, .G = 4, .dtype = DType::bf16});
  check_step({.B = 2, .D = 37, .N = 60, .with_D = false, .with_z = false, .with_bias = false, .softplus = false});
  check_step({.B = 2, .D = 19, .N = 100});          // eight entries a lane, the last part empty
  check_step({.B = 1, .D = 16, .N = 256, .G = 2});  // sixteen a lane, the widest
}

// Packed sequences of 1, 7 and 33 tokens (and an empty one: its final state is its initial state), and padded
// batches whose channel count leaves the last CTA's half-warps partly idle.
TEST(CudaSelectiveScan, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (bool in_place : {true, false}) {
    check_scan({.D = 40, .L = 41, .cu = {0, 1, 8, 8, 41}}, in_place);
    check_scan({.D = 24, .L = 41, .N = 4, .G = 2, .cu = {0, 33, 34, 41}}, in_place);
    check_scan({.D = 12, .L = 41, .N = 128, .cu = {0, 1, 8, 8, 41}}, in_place);
    check_scan({.D = 9, .L = 20, .N = 200, .G = 1, .cu = {0, 13, 20}}, in_place);
  }
  check_scan({.B = 3, .D = 33, .L = 17}, true);
  check_scan({.B = 2, .D = 16, .L = 9, .with_h0 = false}, false);
}

// Strong decays (dt A near -20: the state forgets each token) and mild ones (near -1e-3: it carries across).
TEST(CudaSelectiveScan, MatchesDecayStrengths) {
  REQUIRE_GPU();
  check_scan({.D = 64, .L = 33, .A_scale = 8.f, .delta_mean = 3.f}, true);
  check_scan({.D = 64, .L = 33, .A_scale = 0.01f, .delta_mean = -4.f}, true);
}

TEST(CudaSelectiveScan, MatchesDtypes) {
  REQUIRE_GPU();
  Case c{.D = 64, .L = 7, .dtype = DType::bf16};
  check_scan(c, true);
  c.out_dtype = DType::bf16;
  check_scan(c, true);
  c.dtype = DType::f16, c.out_dtype = DType::f16, c.cu = {0, 3, 7};
  check_scan(c, false);
}

// The decode step on states in a pool (state_batch_indices, the GPU runner's decode): scattered, permuted slots of
// a slab whose rows hold more than the state, and pads (-1), against the reference on the same states gathered
// (testing/pool_slots_testing.h's checks: nothing else of the slab touched, the pads' outputs unwritten).
TEST(CudaSelectiveScan, MatchesDecodeStepOnPoolSlots) {
  REQUIRE_GPU();
  const int64_t D = 1536, N = 16;
  testing::PoolSlots pool({3, 0, -1, 6, -1}, 7, 12, D * N, 4, 9);
  const int64_t Bn = pool.count();
  HostTensor x(DType::bf16, {Bn, D}, 1), dt(DType::bf16, {Bn, D}, 2, 0.5f), A(DType::f32, {D, N}, 3),
      Bm(DType::bf16, {Bn, N}, 4, 0.5f), Cm(DType::bf16, {Bn, N}, 5, 0.5f), skip(DType::f32, {D}, 6),
      z(DType::bf16, {Bn, D}, 7), bias(DType::f32, {D}, 8, 0.3f), dense(DType::f32, {Bn, D, N}, 10),
      y_ref(DType::f32, {Bn, D}, 0, 0.f), y(DType::f32, {Bn, D}, 0, 0.f);
  for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -std::fabs(A.at(i));
  pool.place(dense.view.ptr<float>());
  SelectiveStateUpdateArgs a;
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = skip.view, a.z = z.view;
  a.dt_bias = bias.view, a.dt_softplus = true, a.state = dense.view, a.y = y_ref.view;
  selective_state_update_reference(a);  // dense: after
  testing::fill_nan_bytes(y);
  DeviceBuffer idx(Device::cuda(), pool.index.size() * sizeof(int32_t));
  idx.upload(pool.index.data(), pool.index.size() * sizeof(int32_t));
  const OnDevice xd(x), dtd(dt), Ad(A), Bd(Bm), Cd(Cm), skipd(skip), zd(z), biasd(bias), yd(y), slab(pool.slab);
  a.x = xd.view, a.dt = dtd.view, a.A = Ad.view, a.B = Bd.view, a.C = Cd.view, a.D = skipd.view, a.z = zd.view;
  a.dt_bias = biasd.view, a.y = yd.view;
  a.state = pool.rows(slab.buffer.data(), {D, N});
  a.state_batch_indices = idx.as<int32_t>();
  selective_state_update(a);
  synchronize(current_stream());
  yd.download(y);
  slab.download(pool.slab);
  pool.expect_outputs(y, y_ref, D, 1e-4);
  pool.expect_states(dense.view.ptr<float>(), 1e-4);
}

#else

TEST(CudaSelectiveScan, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
