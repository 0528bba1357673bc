// Mamba's device seam, checked on the host in every build: tensors on two devices are refused naming the odd
// one, the references (CPU only so far) refuse a device tensor by name, and a scan or decode step on a GPU that
// is not there (or in a build without CUDA) is a DeviceError, never a device pointer read by the host. The
// tensors marked as device ones below hold host memory: every refusal must come before anything reads them.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/mamba/mamba.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

// Two sequences of 3 tokens (the step: 2 sequences) over 8 channels with N = 16.
struct Inputs {
  HostTensor u{DType::f32, {2, 8, 3}, 1}, delta{DType::f32, {2, 8, 3}, 2}, A{DType::f32, {8, 16}, 3},
      B{DType::f32, {2, 16, 3}, 4}, C{DType::f32, {2, 16, 3}, 5}, D{DType::f32, {8}, 6},
      state{DType::f32, {2, 8, 16}, 7}, out{DType::f32, {2, 8, 3}, 0, 0.f};
  HostTensor x1{DType::f32, {2, 8}, 1}, dt1{DType::f32, {2, 8}, 2}, B1{DType::f32, {2, 16}, 4},
      C1{DType::f32, {2, 16}, 5}, y1{DType::f32, {2, 8}, 0, 0.f};

  SelectiveScanArgs scan(bool gpu) const {
    SelectiveScanArgs a;
    a.u = u.view, a.delta = delta.view, a.A = A.view, a.B = B.view, a.C = C.view, a.D = D.view;
    a.initial_state = state.view, a.final_state = state.view, a.out = out.view;
    if (gpu) testing::mark_on_gpu({&a.u, &a.delta, &a.A, &a.B, &a.C, &a.D, &a.initial_state, &a.final_state, &a.out});
    return a;
  }
  SelectiveStateUpdateArgs step(bool gpu) const {
    SelectiveStateUpdateArgs a;
    a.state = state.view, a.x = x1.view, a.dt = dt1.view, a.A = A.view, a.B = B1.view, a.C = C1.view;
    a.D = D.view, a.y = y1.view;
    if (gpu) testing::mark_on_gpu({&a.state, &a.x, &a.dt, &a.A, &a.B, &a.C, &a.D, &a.y});
    return a;
  }
};

TEST(MambaDevice, TensorsOnTwoDevicesAreRefusedNamingTheOddOne) {
  const Inputs in;
  SelectiveScanArgs a = in.scan(true);
  a.A.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { selective_scan(a); }, "A: lives on cpu, u on cuda:0");
  SelectiveStateUpdateArgs s = in.step(false);
  s.y.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { selective_state_update(s); }, "y: lives on cuda:1, state on cpu");
}

TEST(MambaDevice, ReferencesRunOnTheCpuOnly) {
  const Inputs in;
  testing::expect_error<ArgumentError>([&] { selective_scan_reference(in.scan(true)); },
                                       "u: lives on cuda:0; selective_scan_reference runs on the CPU only so far "
                                       "(the recurrent form also runs on CUDA)");
  SelectiveStateUpdateArgs s = in.step(false);
  s.D.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { selective_state_update_reference(s); },
                                       "D: lives on cuda:0; selective_state_update_reference runs on the CPU only");
}

TEST(MambaDevice, ShapesAreStillCheckedForDeviceTensors) {
  const Inputs in;
  SelectiveScanArgs a = in.scan(true);
  a.C = in.B1.view;
  a.C.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { selective_scan(a); }, "C: expected");
  SelectiveStateUpdateArgs s = in.step(true);
  s.x = in.u.view;
  s.x.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { selective_state_update(s); }, "x: expected [batch, channels]");
}

TEST(MambaDevice, ScanOnAbsentGpuIsADeviceError) {
  SKIP_WITH_A_REAL_GPU();
  const Inputs in;
  EXPECT_THROW(selective_scan(in.scan(true)), DeviceError);
  EXPECT_THROW(selective_state_update(in.step(true)), DeviceError);
  if (!cuda_built())
    testing::expect_error<DeviceError>([&] { selective_state_update(in.step(true)); }, "u: lives on cuda:0, and ");
}

}  // namespace
}  // namespace attnzoo
