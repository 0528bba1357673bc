#pragma once
// An operand of the step kernels' emulated tests (the twin of layers/cuda/step_test_util.h's DeviceOperand): a
// strided view over host bytes whose every byte outside the view is 0xFF (NaN in every float dtype), values
// N(0, stddev) rounded to the dtype, and its copy in emulated device memory.
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/step_reference.h"

namespace attnzoo::cuda_emulation {

struct StridedOperand {
  std::vector<uint8_t> host;
  TensorView view;  // over `host`
  DeviceMemory device;

  StridedOperand(DType dtype, std::vector<int64_t> shape, uint64_t seed, std::vector<int64_t> strides = {},
                 float stddev = 1.f)
      : device(bytes_of(dtype, shape, strides)) {
    view.dtype = dtype;
    view.ndim = int(shape.size());
    int64_t stride = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
      view.shape[size_t(d)] = shape[size_t(d)];
      view.strides[size_t(d)] = strides.empty() ? stride : strides[size_t(d)];
      stride *= shape[size_t(d)];
    }
    host.assign(device.size(), 0xFF);
    view.data = host.data();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.f, stddev);
    for_each([&](int64_t off) { store_from_f32(view.data, dtype, off, dist(rng)); });
    upload();
  }
  TensorView device_view() const {
    TensorView t = view;
    t.data = device.data();
    return t;
  }
  template <class T>
  T* device_ptr() const {
    return reinterpret_cast<T*>(device.data());
  }
  void upload() { std::memcpy(device.data(), host.data(), host.size()); }
  void download() { std::memcpy(host.data(), device.data(), host.size()); }
  float at(int64_t offset) const { return load_as_f32(view.data, view.dtype, offset); }
  void set(int64_t offset, float v) { store_from_f32(view.data, view.dtype, offset, v); }
  // fn(element offset) for every element of the view, row-major.
  template <class Fn>
  void for_each(Fn&& fn) const {
    testing::for_each_offset(view, fn);
  }
  // The bytes outside the view still 0xFF: nothing wrote between or after the rows.
  bool outside_untouched() const { return testing::outside_untouched(host, view); }

 private:
  // One past the last element, plus 16 bytes: a vector access past the end stays in the allocation only if the
  // kernel's own bound is wrong by less than a vector, which the untouched-bytes check then shows.
  static size_t bytes_of(DType dtype, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
    int64_t extent = 1, stride = 1;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      extent += (shape[size_t(d)] - 1) * (strides.empty() ? stride : strides[size_t(d)]);
      stride *= shape[size_t(d)];
    }
    return size_t(extent) * dtype_size(dtype) + 16;
  }
};

}  // namespace attnzoo::cuda_emulation
