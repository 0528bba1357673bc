// The one-step decode kernels (short conv, Mamba-2, Mamba) on states addressed in a pool, under the CTA emulator,
// as pool_state_cases.cc does the recurrences: scattered, permuted slots with room around each state and padded
// rows (index -1), against the dense CPU twins, and bit for bit every byte the step must not touch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/cuda/selective_scan_kernel.cuh"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/mamba/problem.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/mamba2/problem.h"
#include "kernels/linear/short_conv/conv_problem.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_update_kernel.cuh"
#include "kernels/linear/short_conv/cuda/conv_update_launch.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/mamba2_recurrent_stages.h"
#include "testing/test_util.h"
#include "testing/cuda_emulation/pool_states.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;
using cuda_emulation::Indices;
using cuda_emulation::Pool;
using cuda_emulation::expect_rows;
using cuda_emulation::on_device;
using cuda_emulation::on_gpu;
using cuda_emulation::pool_view;
using testing::HostTensor;

// ---- Short convolution's decode step: conv_update_kernel.cuh ----

void check_conv(int64_t D, int64_t W, int64_t S, const std::vector<int32_t>& index, int64_t slots, DType dtype,
                uint64_t seed) {
  const int64_t N = int64_t(index.size());
  SCOPED_TRACE("D=" + std::to_string(D) + " W=" + std::to_string(W) + " S=" + std::to_string(S) + " N=" +
               std::to_string(N) + " " + dtype_name(dtype));
  HostTensor x(dtype, {N, 1, D}, seed), dense(DType::f32, {N, D, S}, seed + 1), w(dtype, {D, W}, seed + 2, 0.5f),
      b(dtype, {D}, seed + 3);
  HostTensor y_ref(DType::f32, {N, 1, D}, 0, 0.f), s_ref(DType::f32, {N, D, S}, 0, 0.f);
  CausalConv1dOptions o;
  o.bias = b.view, o.initial_state = dense.view, o.final_state = s_ref.view, o.activation = ConvActivation::silu;
  causal_conv1d_reference(x.view, w.view, y_ref.view, o);

  Pool pool(slots, 3, D * S, 9, seed + 100);
  const Indices idx(index);
  const DeviceTensor xd = on_device(x), wd = on_device(w), bd = on_device(b);
  const DeviceTensor yd(DType::f32, {N, 1, D}, 0);  // NaN bytes
  const TensorView states = pool_view(pool, index, dense.view.data, {D, S});
  const ConvProblem p =
      make_conv_update_problem(on_gpu(xd.device_view()), states, on_gpu(wd.device_view()), on_gpu(bd.device_view()),
                               on_gpu(yd.device_view()), ConvActivation::silu, idx.data());
  ASSERT_NO_THROW(check_cuda_conv_update(p));
  const cuda_conv::UpdateLaunch l = cuda_conv::plan_conv_update(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0,
                         [&](unsigned char*) { cuda_conv::conv_update_thread(l.params); });
  expect_rows(index, yd, y_ref, D, 1e-5);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 0.0);  // a shift: exact
}

TEST(EmulatedPoolStates, ConvUpdateInPlace) {
  check_conv(200, 4, 3, {4, -1, 0, 7, -1}, 8, DType::f32, 50);
  check_conv(96, 4, 4, {2, 5}, 6, DType::bf16, 51);
  check_conv(130, 2, 1, {0, 1, 2, -1}, 3, DType::f32, 52);
}

TEST(EmulatedPoolStates, ConvUpdateRefusals) {
  HostTensor x(DType::f32, {2, 1, 8}, 1), w(DType::f32, {8, 4}, 2), y(DType::f32, {2, 1, 8}, 0, 0.f),
      pool(DType::f32, {3, 8, 3}, 3);
  const std::vector<int32_t> index{2, 0};
  auto gpu = [](const HostTensor& h) { return on_gpu(h.view); };
  EXPECT_NO_THROW(make_conv_update_problem(gpu(x), gpu(pool), gpu(w), {}, gpu(y), ConvActivation::none,
                                           index.data()));
  // Host tensors: the CPU step takes dense states.
  EXPECT_THROW(make_conv_update_problem(x.view, pool.view, w.view, {}, y.view, ConvActivation::none, index.data()),
               ArgumentError);
  TensorView overlapping = gpu(pool);
  overlapping.strides[0] = 8 * 3 - 1;
  EXPECT_THROW(make_conv_update_problem(gpu(x), overlapping, gpu(w), {}, gpu(y), ConvActivation::none,
                                        index.data()),
               ArgumentError);
}

// ---- Mamba-2's decode step: mamba2_recurrent_kernel.cuh ----

void check_mamba2(int64_t H, int64_t P, int64_t G, int64_t N, const std::vector<int32_t>& index, int64_t slots,
                  DType dtype, uint64_t seed) {
  const int64_t Bn = int64_t(index.size());
  SCOPED_TRACE("H=" + std::to_string(H) + " P=" + std::to_string(P) + " G=" + std::to_string(G) + " N=" +
               std::to_string(N) + " Bn=" + std::to_string(Bn) + " " + dtype_name(dtype));
  HostTensor x(dtype, {Bn, H, P}, seed), dt(dtype, {Bn, H}, seed + 1), A(DType::f32, {H}, seed + 2),
      Bm(dtype, {Bn, G, N}, seed + 3, 0.5f), Cm(dtype, {Bn, G, N}, seed + 4, 0.5f), D(dtype, {H}, seed + 5),
      z(dtype, {Bn, H, P}, seed + 6), bias(DType::f32, {H}, seed + 7, 0.5f), dense(DType::f32, {Bn, H, P, N}, seed + 8);
  for (int64_t h = 0; h < H; ++h) A.view.ptr<float>()[h] = -0.5f - std::fabs(A.at(h));
  Pool pool(slots, 11, H * P * N, 2, seed + 100);

  HostTensor y_ref(DType::f32, {Bn, H, P}, 0, 0.f), s_ref = dense;
  Mamba2StepArgs a;
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = D.view, a.z = z.view;
  a.dt_bias = bias.view, a.dt_softplus = true, a.state = s_ref.view, a.y = y_ref.view;
  mamba2_state_update_reference(a);

  const Indices idx(index);
  const DeviceTensor xd = on_device(x), dtd = on_device(dt), Ad = on_device(A), Bd = on_device(Bm), Cd = on_device(Cm),
                     Dd = on_device(D), zd = on_device(z), biasd = on_device(bias);
  const DeviceTensor yd(DType::f32, {Bn, H, P}, 0);  // NaN bytes
  a.x = on_gpu(xd.device_view()), a.dt = on_gpu(dtd.device_view()), a.A = on_gpu(Ad.device_view());
  a.B = on_gpu(Bd.device_view()), a.C = on_gpu(Cd.device_view()), a.D = on_gpu(Dd.device_view());
  a.z = on_gpu(zd.device_view()), a.dt_bias = on_gpu(biasd.device_view()), a.y = on_gpu(yd.device_view());
  a.state = pool_view(pool, index, dense.view.data, {H, P, N});
  a.state_batch_indices = idx.data();
  const Mamba2Problem p = make_mamba2_step_problem(a);
  ASSERT_NO_THROW(check_cuda_mamba2_recurrent(p));
  cuda_mamba2::RecurrentLaunch l = cuda_mamba2::plan_mamba2_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());
  cuda_emulation::run_mamba2_recurrent(l, seed);
  expect_rows(index, yd, y_ref, H * P, 1e-4);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Falcon-H1's N = 256 (eight columns a lane) and a 2-group model with P = 30 (a part-empty last warp).
TEST(EmulatedPoolStates, Mamba2StepInPlace) {
  check_mamba2(2, 64, 1, 128, {3, -1, 0, 6, -1, -1}, 7, DType::f32, 60);
  check_mamba2(4, 30, 2, 64, {1, 0}, 2, DType::bf16, 61);
  check_mamba2(1, 16, 1, 256, {-1, 2}, 4, DType::f32, 62);
}

// ---- Mamba's decode step: selective_scan_kernel.cuh ----

void check_mamba(int64_t D, int64_t N, const std::vector<int32_t>& index, int64_t slots, DType dtype, uint64_t seed) {
  const int64_t Bn = int64_t(index.size());
  SCOPED_TRACE("D=" + std::to_string(D) + " N=" + std::to_string(N) + " Bn=" + std::to_string(Bn) + " " +
               dtype_name(dtype));
  HostTensor x(dtype, {Bn, D}, seed), dt(dtype, {Bn, D}, seed + 1, 0.5f), A(DType::f32, {D, N}, seed + 2),
      Bm(dtype, {Bn, N}, seed + 3, 0.5f), Cm(dtype, {Bn, N}, seed + 4, 0.5f), skip(dtype, {D}, seed + 5),
      z(dtype, {Bn, D}, seed + 6), bias(DType::f32, {D}, seed + 7, 0.3f), dense(DType::f32, {Bn, D, N}, seed + 8);
  for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -std::fabs(A.at(i));
  Pool pool(slots, 5, D * N, 6, seed + 100);

  HostTensor y_ref(DType::f32, {Bn, D}, 0, 0.f), s_ref = dense;
  SelectiveStateUpdateArgs a;
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = skip.view, a.z = z.view;
  a.dt_bias = bias.view, a.dt_softplus = true, a.state = s_ref.view, a.y = y_ref.view;
  selective_state_update_reference(a);

  const Indices idx(index);
  const DeviceTensor xd = on_device(x), dtd = on_device(dt), Ad = on_device(A), Bd = on_device(Bm), Cd = on_device(Cm),
                     skipd = on_device(skip), zd = on_device(z), biasd = on_device(bias);
  const DeviceTensor yd(DType::f32, {Bn, D}, 0);  // NaN bytes
  a.x = on_gpu(xd.device_view()), a.dt = on_gpu(dtd.device_view()), a.A = on_gpu(Ad.device_view());
  a.B = on_gpu(Bd.device_view()), a.C = on_gpu(Cd.device_view()), a.D = on_gpu(skipd.device_view());
  a.z = on_gpu(zd.device_view()), a.dt_bias = on_gpu(biasd.device_view()), a.y = on_gpu(yd.device_view());
  a.state = pool_view(pool, index, dense.view.data, {D, N});
  a.state_batch_indices = idx.data();
  const SelectiveScanProblem p = make_selective_step_problem(a);
  ASSERT_NO_THROW(check_cuda_selective_scan(p));
  const cuda_mamba::ScanLaunch l = cuda_mamba::plan_selective_scan(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0, [&](unsigned char*) {
    switch (l.per_lane) {
      case 1: cuda_mamba::selective_scan_channel<1>(l.params); break;
      case 2: cuda_mamba::selective_scan_channel<2>(l.params); break;
      default: cuda_mamba::selective_scan_channel<4>(l.params); break;
    }
  });
  expect_rows(index, yd, y_ref, D, 1e-4);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Mamba's N = 16; D = 37 with N = 60 (a part-empty CTA of channels, four entries a lane).
TEST(EmulatedPoolStates, MambaStepInPlace) {
  check_mamba(64, 16, {2, -1, 0, 5}, 6, DType::f32, 70);
  check_mamba(37, 60, {1, 3, -1}, 4, DType::bf16, 71);
}

// The Mamba steps refuse pool states on the host, by name.
TEST(EmulatedPoolStates, StepRefusalsOnTheHost) {
  HostTensor x(DType::f32, {2, 8}, 1), A(DType::f32, {8, 4}, 2), Bm(DType::f32, {2, 4}, 3),
      y(DType::f32, {2, 8}, 0, 0.f),
      pool(DType::f32, {3, 8, 4}, 4);
  const std::vector<int32_t> index{2, 0};
  SelectiveStateUpdateArgs a;
  a.x = x.view, a.dt = x.view, a.A = A.view, a.B = Bm.view, a.C = Bm.view, a.state = pool.view, a.y = y.view;
  a.state_batch_indices = index.data();
  try {
    make_selective_step_problem(a);
    ADD_FAILURE() << "host pool states accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("state_batch_indices"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
