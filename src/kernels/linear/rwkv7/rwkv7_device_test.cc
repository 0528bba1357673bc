// RWKV-7's device seam, checked on the host in every build: tensors on two devices are refused naming the odd
// one, the entry that runs on the CPU only (the reference) refuses a device tensor by name, shapes are
// still checked, and a recurrent call on a GPU that is not there (or in a build without CUDA) is a DeviceError,
// never a device pointer read by the host. The tensors marked as device ones below hold host memory: every
// refusal must come before anything reads them.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

// Two sequences of 3 tokens, 2 heads, K = 8, V = 4.
struct Inputs {
  HostTensor r{DType::f32, {2, 3, 2, 8}, 1}, w{DType::f32, {2, 3, 2, 8}, 2, 0.f}, k{DType::f32, {2, 3, 2, 8}, 3},
      v{DType::f32, {2, 3, 2, 4}, 4}, a{DType::f32, {2, 3, 2, 8}, 5}, b{DType::f32, {2, 3, 2, 8}, 6},
      state{DType::f32, {2, 2, 8, 4}, 7}, o{DType::f32, {2, 3, 2, 4}, 0, 0.f};
  Rwkv7Args args() const {
    Rwkv7Args x;
    x.r = r.view, x.w = w.view, x.k = k.view, x.v = v.view, x.a = a.view, x.b = b.view;
    x.initial_state = state.view, x.final_state = state.view, x.o = o.view;
    return x;
  }
};

Rwkv7Args on_gpu(Rwkv7Args a) {
  testing::mark_on_gpu({&a.r, &a.w, &a.k, &a.v, &a.a, &a.b, &a.initial_state, &a.final_state, &a.o});
  return a;
}

TEST(Rwkv7Device, TensorsOnTwoDevicesAreRefusedNamingTheOddOne) {
  const Inputs in;
  Rwkv7Args a = on_gpu(in.args());
  a.b.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { recurrent_rwkv7(a); }, "b: lives on cpu, r on cuda:0");
  a = in.args();
  a.final_state.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { recurrent_rwkv7(a); }, "final_state: lives on cuda:1, r on cpu");
}

TEST(Rwkv7Device, ReferenceRunsOnTheCpuOnly) {
  const Inputs in;
  testing::expect_error<ArgumentError>([&] { rwkv7_reference(on_gpu(in.args())); },
                                       "r: lives on cuda:0; rwkv7_reference");
  Rwkv7Args a = in.args();  // any one tensor on a device is named, even when r is on the host
  a.o.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { rwkv7_reference(a); }, "o: lives on cuda:0; rwkv7_reference");
}

// The chunked form on a device: its chunk_size is checked first, then (in a CUDA build) what only the CUDA chunk
// refuses, all before anything reads the tensors.
TEST(Rwkv7Device, ChunkedFormChecksBeforeTheDevice) {
  const Inputs in;
  testing::expect_error<ArgumentError>([&] { chunk_rwkv7(on_gpu(in.args()), 48); }, "chunk_size: must be 16");
  if (cuda_built()) {
    testing::expect_error<ArgumentError>([&] { chunk_rwkv7(on_gpu(in.args()), 128); },
                                         "chunk_size: the CUDA chunked kernels run chunks of 16, 32 or 64");
  }
}

TEST(Rwkv7Device, ShapesAreStillCheckedForDeviceTensors) {
  const Inputs in;
  Rwkv7Args a = in.args();
  a.a = in.v.view;
  testing::expect_error<ArgumentError>([&] { recurrent_rwkv7(on_gpu(a)); }, "a: expected shape [2, 3, 2, 8]");
  a = in.args();
  a.initial_state = in.o.view;
  testing::expect_error<ArgumentError>([&] { recurrent_rwkv7(on_gpu(a)); }, "initial_state: expected shape");
}

// Without a GPU the recurrent entry raises a DeviceError (in a CUDA build from the runtime, without CUDA naming
// r's device and the reason) before any kernel could read the host memory behind these views.
TEST(Rwkv7Device, RecurrentOnAbsentGpuIsADeviceError) {
  SKIP_WITH_A_REAL_GPU();
  const Inputs in;
  EXPECT_THROW(recurrent_rwkv7(on_gpu(in.args())), DeviceError);
  if (!cuda_built())
    testing::expect_error<DeviceError>([&] { recurrent_rwkv7(on_gpu(in.args())); }, "r: lives on cuda:0, and ");
}

TEST(Rwkv7Device, ChunkedOnAbsentGpuIsADeviceError) {
  SKIP_WITH_A_REAL_GPU();
  const Inputs in;
  EXPECT_THROW(chunk_rwkv7(on_gpu(in.args())), DeviceError);
  if (!cuda_built())
    testing::expect_error<DeviceError>([&] { chunk_rwkv7(on_gpu(in.args())); }, "r: lives on cuda:0, and ");
}

}  // namespace
}  // namespace attnzoo
