#pragma once
// Test operands for the emulated kernels: host storage (seeded N(mean, 1) values, or NaN bytes for outputs, so
// unwritten elements show) and its copy in emulated device memory, with views of both; a HostTensor's copy there
// and the way back (the case files that build their operands as the CPU twins' tests do).
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/test_util.h"

namespace attnzoo::cuda_emulation {

struct DeviceTensor {
  std::vector<uint8_t> host;
  TensorView view;  // host view
  DeviceMemory device;

  // Contiguous over `shape`, except that each token (the dimension before the last two) may be followed by
  // `token_pad` spare elements: a slice of a wider array.
  DeviceTensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed, int64_t token_pad = 0,
               float mean = 0.f)
      : device(bytes_of(dtype, shape, token_pad)) {
    view.dtype = dtype;
    view.ndim = int(shape.size());
    int64_t stride = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
      view.shape[size_t(d)] = shape[size_t(d)];
      view.strides[size_t(d)] = stride;
      stride *= shape[size_t(d)];
      if (d == view.ndim - 2) stride += token_pad;
    }
    host.assign(device.size(), 0xFF);  // NaN in every float dtype
    view.data = host.data();
    if (seed != 0) {
      std::mt19937_64 rng(seed);
      std::normal_distribution<float> dist(mean, 1.f);
      for (int64_t i = 0; i < view.shape[0] * view.strides[0]; ++i) store_from_f32(view.data, dtype, i, dist(rng));
    }
    upload();
  }
  // Device copy of host data built elsewhere (caches, scales).
  explicit DeviceTensor(const TensorView& from, size_t bytes) : device(bytes) {
    host.assign(static_cast<const uint8_t*>(from.data), static_cast<const uint8_t*>(from.data) + bytes);
    view = from;
    view.data = host.data();
    upload();
  }

  void upload() { std::memcpy(device.data(), host.data(), host.size()); }
  void download() { std::memcpy(host.data(), device.data(), host.size()); }
  TensorView device_view() const {
    TensorView t = view;
    t.data = device.data();
    return t;
  }

 private:
  static size_t bytes_of(DType dtype, const std::vector<int64_t>& shape, int64_t token_pad) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    int64_t tokens = 1;
    for (size_t d = 0; d + 2 < shape.size(); ++d) tokens *= shape[d];
    return size_t(std::max<int64_t>(n + tokens * token_pad, 1)) * dtype_size(dtype);
  }
};

inline DeviceTensor on_device(const testing::HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); }

// The device bytes of `d` (made by on_device(h)) back into `h`.
inline void download(const DeviceTensor& d, testing::HostTensor& h) {
  std::memcpy(h.bytes.data(), d.device.data(), h.bytes.size());
}

}  // namespace attnzoo::cuda_emulation
