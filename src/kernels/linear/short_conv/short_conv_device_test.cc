// The short convolution's device seam, checked on the host in every build: tensors on two devices are refused
// naming the odd one, the reference refuses a device tensor by name, and a prefill or decode step on a GPU that
// is not there (or in a build without CUDA) is a DeviceError, never a device pointer read by the host.
// The tensors marked as device ones below hold host memory: every refusal must come before anything reads them.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::on_gpu;

// Decode: 2 sequences, 8 channels, width 4, a 3-entry state. Prefill: 2 sequences of 5 tokens.
struct Inputs {
  HostTensor x{DType::f32, {2, 8}, 1}, state{DType::f32, {2, 8, 3}, 2}, w{DType::f32, {8, 4}, 3},
      b{DType::f32, {8}, 4}, y{DType::f32, {2, 8}, 0, 0.f};
  HostTensor xs{DType::f32, {2, 5, 8}, 5}, ys{DType::f32, {2, 5, 8}, 0, 0.f};
};

TEST(ShortConvDevice, TensorsOnTwoDevicesAreRefusedNamingTheOddOne) {
  Inputs in;
  testing::expect_error<ArgumentError>(
      [&] {
        causal_conv1d_update(on_gpu(in.x.view), on_gpu(in.state.view), in.w.view, on_gpu(in.b.view),
                             on_gpu(in.y.view), ConvActivation::silu);
      },
      "weight: lives on cpu, x on cuda:0");
  testing::expect_error<ArgumentError>(
      [&] {
        causal_conv1d_update(in.x.view, on_gpu(in.state.view, 1), in.w.view, in.b.view, in.y.view,
                             ConvActivation::none);
      },
      "conv_state: lives on cuda:1, x on cpu");
}

TEST(ShortConvDevice, ReferenceRunsOnTheCpuOnly) {
  Inputs in;
  CausalConv1dOptions opts;
  opts.bias = on_gpu(in.b.view);
  testing::expect_error<ArgumentError>(
      [&] { causal_conv1d_reference(on_gpu(in.xs.view), on_gpu(in.w.view), on_gpu(in.ys.view), opts); },
      "x: lives on cuda:0; causal_conv1d_reference runs on the CPU only so far (causal_conv1d, like "
      "causal_conv1d_update, also runs on CUDA)");
  testing::expect_error<ArgumentError>([&] { causal_conv1d_reference(in.xs.view, in.w.view, in.ys.view, opts); },
                                       "bias: lives on cuda:0; causal_conv1d_reference runs on the CPU only");
  // The prefill checks the devices first, as the decode step does.
  testing::expect_error<ArgumentError>([&] { causal_conv1d(on_gpu(in.xs.view), in.w.view, on_gpu(in.ys.view), opts); },
                                       "weight: lives on cpu, x on cuda:0");
}

TEST(ShortConvDevice, ShapesAreStillCheckedForDeviceTensors) {
  Inputs in;
  testing::expect_error<ArgumentError>(
      [&] {
        causal_conv1d_update(on_gpu(in.x.view), on_gpu(in.state.view), on_gpu(in.b.view), {}, on_gpu(in.y.view),
                             ConvActivation::none);
      },
      "weight: expected [8, W]");
  HostTensor short_state(DType::f32, {2, 8, 2}, 6);
  testing::expect_error<ArgumentError>(
      [&] {
        causal_conv1d_update(on_gpu(in.x.view), on_gpu(short_state.view), on_gpu(in.w.view), {}, on_gpu(in.y.view),
                             ConvActivation::none);
      },
      "conv_state: expected [2, 8, S] with S >= 3");
}

TEST(ShortConvDevice, DecodeAndPrefillOnAbsentGpuAreDeviceErrors) {
  SKIP_WITH_A_REAL_GPU();
  Inputs in;
  auto run = [&] {
    causal_conv1d_update(on_gpu(in.x.view), on_gpu(in.state.view), on_gpu(in.w.view), on_gpu(in.b.view),
                         on_gpu(in.y.view), ConvActivation::silu);
  };
  EXPECT_THROW(run(), DeviceError);
  if (!cuda_built()) testing::expect_error<DeviceError>(run, "x: lives on cuda:0, and ");
  CausalConv1dOptions opts;
  opts.bias = on_gpu(in.b.view);
  opts.initial_state = opts.final_state = on_gpu(in.state.view);
  auto prefill = [&] { causal_conv1d(on_gpu(in.xs.view), on_gpu(in.w.view), on_gpu(in.ys.view), opts); };
  EXPECT_THROW(prefill(), DeviceError);
  if (!cuda_built()) testing::expect_error<DeviceError>(prefill, "x: lives on cuda:0, and ");
}

}  // namespace
}  // namespace attnzoo
