// The device seam on a machine with or without a GPU: names, host buffers, and the errors that say why a device
// cannot be used (a build without CUDA, or no GPU) instead of crashing.
#include "core/device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(Device, ParsesTheNamesFrontEndsTake) {
  EXPECT_EQ(parse_device("cpu", "device"), Device::cpu());
  EXPECT_EQ(parse_device("cuda", "device"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3", "device"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_EQ(Device::cpu().str(), "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:123456"})
    testing::expect_error<ArgumentError>([&] { parse_device(bad, "--device"); }, "--device");
}

TEST(Device, HostBufferRoundTrips) {
  DeviceBuffer b(Device::cpu(), 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  std::vector<uint8_t> in(100), out(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7);
  b.upload(in.data(), in.size());
  b.download(out.data(), out.size());
  EXPECT_EQ(in, out);
  testing::expect_error<ArgumentError>([&] { b.upload(in.data(), 101); }, "bytes");
  DeviceBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.bytes(), 100u);
}

TEST(Device, StreamGuardRestoresTheOuterStream) {
  int a = 0, b = 0;
  EXPECT_EQ(current_stream().handle, nullptr);
  {
    StreamGuard outer(Stream{&a});
    {
      StreamGuard inner(Stream{&b});
      EXPECT_EQ(current_stream().handle, &b);
    }
    EXPECT_EQ(current_stream().handle, &a);
  }
  EXPECT_EQ(current_stream().handle, nullptr);
}

// Without a GPU (every CI machine), asking for one is a DeviceError that says why, in either build.
TEST(Device, NoGpuIsANamedError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(cuda_unavailable_reason().empty());
  if (!cuda_built()) EXPECT_NE(cuda_unavailable_reason().find("without CUDA"), std::string::npos);
  testing::expect_error<DeviceError>([] { DeviceBuffer(Device::cuda(), 16); }, "cuda");
  testing::expect_error<DeviceError>([] { cuda_device_info(0); }, "cuda:0");
}

TEST(Device, HostOnlyKernelsRefuseDeviceTensors) {
  TensorView t = TensorView::contiguous(reinterpret_cast<void*>(0x1000), DType::f32, {2, 3});
  t.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { require_host(t, "state"); }, "state: lives on cuda:1");
  t.device = Device::cpu();
  require_host(t, "state");
}

}  // namespace
}  // namespace attnzoo
