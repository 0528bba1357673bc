// The state-space CUDA kernels under the CTA emulator against the double references, on the launch geometry
// their launchers plan (mamba2_recurrent_launch.h, selective_scan_launch.h, conv_update_launch.h), with the GPU
// tests' tolerances: Mamba-2's recurrence (mamba2_recurrent_kernel.cuh), Mamba's selective scan
// (selective_scan_kernel.cuh) and the short convolution's decode step (conv_update_kernel.cuh). Ragged packed
// sequences with a one-token and an empty one, one-token decode (Mamba-2 2.7B's heads at batch 1, Mamba 2.8B's
// channels), every register width of a state row, groups, bf16 / f16 / f32 in and out, strong and mild decays,
// in-place and separate states. Outputs and separate final states start as NaN bytes, so an element the kernel
// forgets fails.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_update_kernel.cuh"
#include "kernels/linear/short_conv/cuda/conv_update_launch.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/mamba2_operands.h"
#include "testing/cuda_emulation/mamba2_recurrent_stages.h"
#include "testing/cuda_emulation/selective_scan_stages.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceTensor;
using cuda_emulation::download;
using cuda_emulation::on_device;
using testing::HostTensor;

double output_tolerance(DType out) { return out == DType::f32 ? 1e-4 : 1e-2; }

// ---- Mamba-2 ----

using Mamba2Case = testing::Mamba2DeviceCase;
using testing::mamba2_case;

// With `in_place` the final state overwrites the initial one (the engine's decode step).
void check_mamba2(const Mamba2Case& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + (in_place ? " in-place" : ""));
  const testing::Mamba2DeviceInputs in(c, seed);
  const testing::Mamba2Outputs ref = testing::mamba2_host_outputs(c, in, mamba2_reference);
  cuda_emulation::Mamba2Operands d(c, in, in_place);
  const Mamba2Problem p = make_mamba2_problem(d.args);
  ASSERT_NO_THROW(check_cuda_mamba2_recurrent(p));

  cuda_mamba2::RecurrentLaunch l = cuda_mamba2::plan_mamba2_recurrent(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_mamba2_recurrent(l, seed);
  d.download();
  EXPECT_LE(testing::relative_rms(d.o, ref.y), output_tolerance(c.out_dtype));
  EXPECT_LE(testing::relative_rms(d.s, ref.s), 1e-4);
}

// Mamba-2 2.7B's decode step at batch 1: 80 heads of 64 x 128 states, one group, bf16 activations.
TEST(EmulatedMamba2Recurrent, MatchesDecodeStepOf2_7B) {
  Mamba2Case c = mamba2_case(1, 1, 80, 64, 1, 128);
  check_mamba2(c, true, 100);
  c.dtype = c.out_dtype = DType::bf16;
  check_mamba2(c, true, 101);
}

// Packed sequences of 1, 7, 0 and 33 tokens (the empty one's final state is its initial state), then 33, 1 and 7
// with P = 30 and N = 100 leaving the last warp's rows and the lanes' last columns part empty.
TEST(EmulatedMamba2Recurrent, MatchesRaggedPackedSequences) {
  Mamba2Case c = mamba2_case(1, 41, 4, 64, 2, 64);
  c.cu = {0, 1, 8, 8, 41};
  check_mamba2(c, true, 200);
  c = mamba2_case(1, 41, 2, 30, 1, 100);
  c.cu = {0, 33, 34, 41};
  check_mamba2(c, false, 201);
  c = mamba2_case(1, 7, 4, 64, 1, 128);
  c.cu = {0, 2, 7};
  c.dtype = c.out_dtype = DType::f16;
  check_mamba2(c, false, 202);
}

// Every register width (N = 16, 128, 256), D per channel, no gate, dt clamped with and without softplus, a zero
// initial state, and a single-element state.
TEST(EmulatedMamba2Recurrent, MatchesShapesAndOptions) {
  Mamba2Case c = mamba2_case(3, 1, 8, 64, 2, 256);
  c.D_per_channel = true;
  check_mamba2(c, true, 300);
  c = mamba2_case(2, 3, 4, 60, 4, 16);
  c.with_z = false, c.limit = true, c.dtype = DType::bf16;
  check_mamba2(c, true, 301);
  c = mamba2_case(2, 5, 3, 8, 3, 16);
  c.softplus = false, c.limit = true;
  check_mamba2(c, false, 302);
  c = mamba2_case(2, 9, 2, 64, 1, 128);
  c.with_h0 = false, c.out_dtype = DType::bf16;
  check_mamba2(c, false, 303);
  check_mamba2(mamba2_case(1, 5, 1, 1, 1, 1), true, 304);
}

// exp(A dt) near e^-24 wipes the state each token; near 1 - 2e-4 it keeps nearly all of it.
TEST(EmulatedMamba2Recurrent, MatchesStrongAndMildDecays) {
  Mamba2Case c = mamba2_case(1, 17, 4, 64, 1, 128);
  c.A_min = -8.f, c.A_max = -6.f, c.dt_mean = 3.f;
  check_mamba2(c, true, 400);
  c.A_min = -0.02f, c.A_max = -0.01f, c.dt_mean = -4.f;
  check_mamba2(c, false, 401);
}

// ---- Mamba (selective scan) ----

struct ScanCase {
  int64_t B = 1, D = 64, L = 1, N = 16, G = 0;  // G = 0: B and C without a group dimension
  std::vector<int32_t> cu_seqlens;
  float A_scale = 1.f, delta_mean = 0.f;
  DType dtype = DType::f32, out = DType::f32;
};

ScanCase scan_shape(int64_t B, int64_t D, int64_t L, int64_t N, int64_t G = 0) {
  ScanCase c;
  c.B = B, c.D = D, c.L = L, c.N = N, c.G = G;
  return c;
}

void check_scan(const ScanCase& c, bool in_place, uint64_t seed) {
  SCOPED_TRACE("B=" + std::to_string(c.B) + " D=" + std::to_string(c.D) + " L=" + std::to_string(c.L) +
               " N=" + std::to_string(c.N) + " G=" + std::to_string(c.G) + " " + dtype_name(c.dtype) + "->" +
               dtype_name(c.out) + (in_place ? " in-place" : ""));
  const int64_t nseq = c.cu_seqlens.empty() ? c.B : int64_t(c.cu_seqlens.size()) - 1;
  const std::vector<int64_t> bc = c.G ? std::vector<int64_t>{c.B, c.G, c.N, c.L} : std::vector<int64_t>{c.B, c.N, c.L};
  const std::vector<int64_t> u_shape{c.B, c.D, c.L}, s_shape{nseq, c.D, c.N};
  HostTensor u(c.dtype, u_shape, seed), delta(c.dtype, u_shape, seed + 1, 0.5f), A(DType::f32, {c.D, c.N}, seed + 2),
      Bm(c.dtype, bc, seed + 3, 0.5f), Cm(c.dtype, bc, seed + 4, 0.5f), skip(c.dtype, {c.D}, seed + 5),
      z(c.dtype, u_shape, seed + 6), bias(DType::f32, {c.D}, seed + 7, 0.3f), h0(DType::f32, s_shape, seed + 8);
  for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -c.A_scale * std::fabs(A.at(i));
  for (int64_t i = 0; i < delta.numel(); ++i) store_from_f32(delta.view.data, c.dtype, i, delta.at(i) + c.delta_mean);
  SelectiveScanArgs a;
  a.u = u.view, a.delta = delta.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = skip.view, a.z = z.view;
  a.delta_bias = bias.view, a.delta_softplus = true, a.initial_state = h0.view;
  if (!c.cu_seqlens.empty()) a.cu_seqlens = c.cu_seqlens.data(), a.cu_seqlens_len = int64_t(c.cu_seqlens.size());
  HostTensor o_ref(DType::f32, u_shape, 0, 0.f), s_ref(DType::f32, s_shape, 0, 0.f);
  a.out = o_ref.view, a.final_state = s_ref.view;
  selective_scan_reference(a);

  HostTensor o(c.out, u_shape, 0, 0.f), s(DType::f32, s_shape, 0, 0.f);
  testing::fill_nan_bytes(o), testing::fill_nan_bytes(s);
  const DeviceTensor ud = on_device(u), deltad = on_device(delta), Ad = on_device(A), Bd = on_device(Bm),
                     Cd = on_device(Cm), skipd = on_device(skip), zd = on_device(z), biasd = on_device(bias),
                     od = on_device(o), sd = on_device(s);
  DeviceTensor init = on_device(h0);
  a.u = ud.device_view(), a.delta = deltad.device_view(), a.A = Ad.device_view(), a.B = Bd.device_view();
  a.C = Cd.device_view(), a.D = skipd.device_view(), a.z = zd.device_view(), a.delta_bias = biasd.device_view();
  a.out = od.device_view(), a.initial_state = init.device_view();
  a.final_state = in_place ? init.device_view() : sd.device_view();
  const SelectiveScanProblem p = make_selective_scan_problem(a);
  ASSERT_NO_THROW(check_cuda_selective_scan(p));

  cuda_mamba::ScanLaunch l = cuda_mamba::plan_selective_scan(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_selective_scan(l, seed);
  download(od, o);
  download(in_place ? init : sd, s);
  EXPECT_LE(testing::relative_rms(o, o_ref), output_tolerance(c.out));
  EXPECT_LE(testing::relative_rms(s, s_ref), 1e-4);
}

// Mamba 2.8B's decode step at batch 1 (5120 channels, N = 16); N = 32 with groups in bf16; N = 60 (four entries a
// lane, the last part empty) with D = 37 leaving the last CTA's channels part empty; N = 100 (eight a lane, part
// empty) and N = 256 (sixteen a lane, the widest).
TEST(EmulatedSelectiveScan, MatchesDecodeStep) {
  check_scan(scan_shape(1, 5120, 1, 16), true, 500);
  ScanCase c = scan_shape(3, 100, 1, 32, 4);
  c.dtype = DType::bf16;
  check_scan(c, true, 501);
  check_scan(scan_shape(2, 37, 1, 60), false, 502);
  check_scan(scan_shape(2, 19, 1, 100), true, 503);
  check_scan(scan_shape(1, 16, 1, 256, 2), false, 504);
}

// Packed sequences of 1, 7, 0 and 33 positions, then 33, 1 and 7 with groups; padded rows of 17 positions.
TEST(EmulatedSelectiveScan, MatchesRaggedPackedSequences) {
  ScanCase c = scan_shape(1, 40, 41, 16);
  c.cu_seqlens = {0, 1, 8, 8, 41};
  check_scan(c, true, 600);
  c = scan_shape(1, 24, 41, 4, 2);
  c.cu_seqlens = {0, 33, 34, 41};
  check_scan(c, false, 601);
  c = scan_shape(1, 12, 41, 128);  // eight entries a lane, over ragged sequences
  c.cu_seqlens = {0, 1, 8, 8, 41};
  check_scan(c, true, 603);
  c = scan_shape(1, 9, 20, 200, 1);  // sixteen a lane, the last part empty
  c.cu_seqlens = {0, 13, 20};
  check_scan(c, false, 604);
  check_scan(scan_shape(3, 33, 17, 16), true, 602);
}

TEST(EmulatedSelectiveScan, MatchesHalfPrecision) {
  ScanCase c = scan_shape(1, 64, 7, 16);
  c.dtype = c.out = DType::bf16;
  check_scan(c, true, 700);
  c.cu_seqlens = {0, 3, 7};
  c.dtype = c.out = DType::f16;
  check_scan(c, false, 701);
}

// exp(dt A) down to e^-100 per step, and up to 1 - 2e-4.
TEST(EmulatedSelectiveScan, MatchesStrongAndMildDecays) {
  ScanCase c = scan_shape(1, 64, 33, 16);
  c.A_scale = 8.f, c.delta_mean = 3.f;
  check_scan(c, true, 800);
  c.A_scale = 0.01f, c.delta_mean = -4.f;
  check_scan(c, false, 801);
}

// ---- Short convolution, decode step ----

// The state is always advanced in place (causal_conv1d_update); it must match the reference bit for bit, since
// it only shifts inputs.
void check_conv(int64_t N, int64_t L, int64_t D, int64_t W, int64_t S, bool silu, DType dtype, uint64_t seed) {
  SCOPED_TRACE("N=" + std::to_string(N) + " L=" + std::to_string(L) + " D=" + std::to_string(D) + " W=" +
               std::to_string(W) + " S=" + std::to_string(S) + " " + dtype_name(dtype));
  HostTensor x(dtype, {N, L, D}, seed), state(DType::f32, {N, D, S}, seed + 1), w(dtype, {D, W}, seed + 2, 0.5f),
      b(dtype, {D}, seed + 3);
  HostTensor y_ref(DType::f32, {N, L, D}, 0, 0.f), s_ref(DType::f32, {N, D, S}, 0, 0.f),
      y(DType::f32, {N, L, D}, 0, 0.f);
  testing::fill_nan_bytes(y);
  CausalConv1dOptions o;
  o.bias = b.view, o.initial_state = state.view, o.final_state = s_ref.view;
  o.activation = silu ? ConvActivation::silu : ConvActivation::none;
  causal_conv1d_reference(x.view, w.view, y_ref.view, o);

  const DeviceTensor xd = on_device(x), wd = on_device(w), bd = on_device(b), yd = on_device(y);
  DeviceTensor sd = on_device(state);
  o.bias = bd.device_view(), o.initial_state = o.final_state = sd.device_view();
  const ConvProblem p = make_conv_problem(xd.device_view(), wd.device_view(), yd.device_view(), o);
  ASSERT_NO_THROW(check_cuda_conv_update(p));

  const cuda_conv::UpdateLaunch l = cuda_conv::plan_conv_update(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0,
                         [&](unsigned char*) { cuda_conv::conv_update_thread(l.params); });
  HostTensor s = state;
  download(yd, y);
  download(sd, s);
  EXPECT_LE(testing::relative_rms(y, y_ref), 1e-5);
  EXPECT_EQ(testing::max_abs_diff(s, s_ref), 0.0);
}

// Wide rows of channels (5376 with W = 4, S = 3; 4096 with a state as long as the window, S = 4), one token each;
// several tokens per call, some longer than the state; a window shorter than the state without activation; bf16;
// wider windows.
TEST(EmulatedConvUpdate, MatchesReference) {
  check_conv(2, 1, 5376, 4, 3, true, DType::f32, 900);
  check_conv(3, 1, 4096, 4, 4, true, DType::f32, 901);
  check_conv(2, 3, 256, 4, 3, true, DType::f32, 902);
  check_conv(2, 6, 96, 4, 3, true, DType::f32, 903);
  check_conv(2, 2, 96, 3, 7, false, DType::f32, 904);
  check_conv(4, 1, 512, 4, 3, true, DType::bf16, 905);
  // Windows past the kernel's four taps in flight: two groups of taps and of state entries, then three of taps
  // with a state longer than the window.
  check_conv(2, 2, 160, 6, 5, true, DType::bf16, 906);
  check_conv(2, 1, 96, 9, 10, false, DType::f32, 907);
}

}  // namespace
}  // namespace attnzoo
