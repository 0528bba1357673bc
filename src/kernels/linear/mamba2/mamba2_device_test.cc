// Mamba-2's device seam, checked on the host in every build: tensors on two devices are refused naming the odd
// one, the entries that run on the CPU only (the references) refuse a device tensor by name, and a recurrent or
// chunked call on a GPU that is not there (or in a build without CUDA) is a DeviceError, never a device pointer
// read by the host. The tensors marked as device ones below hold host memory: every refusal must come
// before anything reads them.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <utility>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

// Two sequences of 3 tokens (the step: 2 sequences), 2 heads of P = 8, one group of N = 16.
struct Inputs {
  HostTensor x{DType::f32, {2, 3, 2, 8}, 1}, dt{DType::f32, {2, 3, 2}, 2, 0.f}, A{DType::f32, {2}, 3},
      B{DType::f32, {2, 3, 1, 16}, 4}, C{DType::f32, {2, 3, 1, 16}, 5}, D{DType::f32, {2}, 6},
      z{DType::f32, {2, 3, 2, 8}, 7}, bias{DType::f32, {2}, 8}, state{DType::f32, {2, 2, 8, 16}, 9},
      y{DType::f32, {2, 3, 2, 8}, 0, 0.f};
  HostTensor x1{DType::f32, {2, 2, 8}, 1}, dt1{DType::f32, {2, 2}, 2, 0.f}, B1{DType::f32, {2, 1, 16}, 4},
      C1{DType::f32, {2, 1, 16}, 5}, y1{DType::f32, {2, 2, 8}, 0, 0.f};

  Mamba2Args args() const {
    Mamba2Args a;
    a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = B.view, a.C = C.view, a.D = D.view, a.z = z.view;
    a.dt_bias = bias.view, a.initial_state = state.view, a.final_state = state.view, a.y = y.view;
    return a;
  }
  Mamba2StepArgs step() const {
    Mamba2StepArgs a;
    a.state = state.view, a.x = x1.view, a.dt = dt1.view, a.A = A.view, a.B = B1.view, a.C = C1.view;
    a.D = D.view, a.dt_bias = bias.view, a.y = y1.view;
    return a;
  }
};

template <typename Args>
Args on_gpu(Args a) {
  if constexpr (std::is_same_v<Args, Mamba2Args>) {
    testing::mark_on_gpu({&a.x, &a.dt, &a.A, &a.B, &a.C, &a.D, &a.z, &a.dt_bias, &a.initial_state, &a.final_state,
                          &a.y});
  } else {
    testing::mark_on_gpu({&a.state, &a.x, &a.dt, &a.A, &a.B, &a.C, &a.D, &a.z, &a.dt_bias, &a.y});
  }
  return a;
}

TEST(Mamba2Device, TensorsOnTwoDevicesAreRefusedNamingTheOddOne) {
  const Inputs in;
  Mamba2Args a = on_gpu(in.args());
  a.B.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { mamba2_recurrent(a); }, "B: lives on cpu, x on cuda:0");
  a = in.args();
  a.final_state.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { mamba2_recurrent(a); }, "final_state: lives on cuda:1, x on cpu");
  Mamba2StepArgs s = on_gpu(in.step());
  s.dt_bias.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { mamba2_state_update(s); }, "dt_bias: lives on cuda:1, state on cuda:0");
  s = in.step();
  s.state.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { mamba2_state_update(s); }, "x: lives on cpu, state on cuda:0");
}

TEST(Mamba2Device, ReferencesRunOnTheCpuOnly) {
  const Inputs in;
  testing::expect_error<ArgumentError>([&] { mamba2_reference(on_gpu(in.args())); },
                                       "x: lives on cuda:0; mamba2_reference runs on the CPU only so far (the "
                                       "chunked form, like the recurrent one, also runs on CUDA)");
  Mamba2Args a = in.args();  // any one tensor on a device is named, even when x is on the host
  a.y.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { mamba2_reference(a); }, "y: lives on cuda:0; mamba2_reference");
  testing::expect_error<ArgumentError>([&] { mamba2_state_update_reference(on_gpu(in.step())); },
                                       "state: lives on cuda:0; mamba2_state_update_reference runs on the CPU "
                                       "only so far (the recurrent form also runs on CUDA)");
}

TEST(Mamba2Device, ShapesAreStillCheckedForDeviceTensors) {
  const Inputs in;
  Mamba2Args a = in.args();
  a.C = in.B1.view;
  testing::expect_error<ArgumentError>([&] { mamba2_recurrent(on_gpu(a)); }, "C: expected 4 dims");
  Mamba2StepArgs s = in.step();
  s.y = in.x.view;
  testing::expect_error<ArgumentError>([&] { mamba2_state_update(on_gpu(s)); }, "y: expected 3 dims");
  s = in.step();
  s.A = in.D.view;
  s.A.shape[0] = 3;
  testing::expect_error<ArgumentError>([&] { mamba2_state_update(on_gpu(s)); }, "A: expected shape [2]");
}

// Without a GPU the recurrent and chunked entries raise a DeviceError (in a CUDA build from the runtime, without
// CUDA naming x's device and the reason) before any kernel could read the host memory behind these views.
TEST(Mamba2Device, DeviceEntriesOnAbsentGpuAreDeviceErrors) {
  SKIP_WITH_A_REAL_GPU();
  const Inputs in;
  EXPECT_THROW(mamba2_recurrent(on_gpu(in.args())), DeviceError);
  EXPECT_THROW(mamba2_chunk_scan(on_gpu(in.args())), DeviceError);
  EXPECT_THROW(mamba2_state_update(on_gpu(in.step())), DeviceError);
  if (!cuda_built())
    testing::expect_error<DeviceError>([&] { mamba2_state_update(on_gpu(in.step())); }, "x: lives on cuda:0, and ");
}

}  // namespace
}  // namespace attnzoo
