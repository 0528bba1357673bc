#pragma once
// Shared by the step kernels' tests (g++, no CUDA headers): operands that live on the host and on the GPU, with
// optional elements between rows that the kernels must leave alone, and views that only the host-side checks see.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "testing/step_reference.h"

namespace attnzoo::testing {

// A view of memory the checks never touch: a CUDA device pointer in name only (16-byte aligned), so refusals can
// be tested without a GPU.
inline TensorView fake_cuda_view(DType dtype, std::vector<int64_t> shape, Device device = Device::cuda(0)) {
  alignas(16) static unsigned char somewhere[16];
  TensorView t;
  t.data = somewhere;
  t.dtype = dtype;
  t.device = device;
  t.ndim = int(shape.size());
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.shape[size_t(d)] = shape[size_t(d)];
    t.strides[size_t(d)] = stride;
    stride *= shape[size_t(d)];
  }
  return t;
}

// Host bytes behind a view of `shape` with `strides` (elements; contiguous when empty), every byte outside the view
// 0xFF (NaN in every float dtype), values N(0, stddev) rounded to the dtype; and its copy on the GPU.
struct DeviceOperand {
  std::vector<uint8_t> host;
  TensorView view;  // over `host`
  DeviceBuffer device;

  DeviceOperand(DType dtype, std::vector<int64_t> shape, uint64_t seed, std::vector<int64_t> strides = {},
                float stddev = 1.f) {
    view.dtype = dtype;
    view.ndim = int(shape.size());
    int64_t stride = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
      view.shape[size_t(d)] = shape[size_t(d)];
      view.strides[size_t(d)] = strides.empty() ? stride : strides[size_t(d)];
      stride *= shape[size_t(d)];
    }
    int64_t extent = 1;  // one past the last element
    for (int d = 0; d < view.ndim; ++d) extent += (view.shape[size_t(d)] - 1) * view.strides[size_t(d)];
    host.assign(size_t(extent) * dtype_size(dtype) + 16, 0xFF);
    view.data = host.data();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.f, stddev);
    for_each([&](int64_t off) { store_from_f32(view.data, dtype, off, dist(rng)); });
    device = DeviceBuffer(Device::cuda(), host.size());
    upload();
  }
  TensorView device_view() const {
    TensorView t = view;
    t.data = device.data();
    t.device = Device::cuda();
    return t;
  }
  void upload() { device.upload(host.data(), host.size()); }
  void download() { device.download(host.data(), host.size()); }
  float at(int64_t offset) const { return load_as_f32(view.data, view.dtype, offset); }
  void set(int64_t offset, float v) { store_from_f32(view.data, view.dtype, offset, v); }
  // fn(element offset) for every element of the view, row-major.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for_each_offset(view, fn);
  }
  // The bytes outside the view still 0xFF: nothing wrote between or after the rows.
  bool outside_untouched() const { return testing::outside_untouched(host, view); }
};

}  // namespace attnzoo::testing
