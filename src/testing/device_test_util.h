#pragma once
// Helpers shared by the tests of the device seam and the CUDA kernels (g++, no CUDA headers, so the *_device_test
// files compile in every build): skipping without a GPU (or with one), a host tensor's copy on the GPU, and
// views marked as device ones that still hold host memory (for refusals checked before anything reads them).
#include <gtest/gtest.h>

#include <initializer_list>

#include "core/device.h"
#include "core/tensor.h"
#include "testing/test_util.h"

// Skips the calling test when no GPU is present, saying why.
#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason()

// Skips the calling test on a machine with a GPU: it hands the entry views that claim a device but hold host memory.
#define SKIP_WITH_A_REAL_GPU() \
  if (cuda_device_count() > 0) GTEST_SKIP() << "a real GPU would read the fake device pointers"

namespace attnzoo::testing {

// A host tensor's bytes on the GPU, and a view of them there.
struct OnDevice {
  DeviceBuffer buffer;
  TensorView view;
  explicit OnDevice(const HostTensor& h) : buffer(Device::cuda(), h.bytes.size()), view(h.view) {
    buffer.upload(h.bytes.data(), h.bytes.size());
    view.data = buffer.data();
    view.device = Device::cuda();
  }
  void download(HostTensor& h) const { buffer.download(h.bytes.data(), h.bytes.size()); }
};

// `t` marked as living on cuda:`index` (its data still host memory).
inline TensorView on_gpu(TensorView t, int index = 0) {
  t.device = Device::cuda(index);
  return t;
}

// Every non-empty view of `views` marked as living on cuda:0 (an args struct's tensors, listed by its test).
inline void mark_on_gpu(std::initializer_list<TensorView*> views) {
  for (TensorView* t : views)
    if (!t->empty()) t->device = Device::cuda();
}

}  // namespace attnzoo::testing
