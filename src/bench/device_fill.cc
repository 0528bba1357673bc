#include "bench/device_fill.h"

#include <algorithm>
#include <cstring>

namespace attnzoo::bench {
namespace {

constexpr size_t kPatternBytes = size_t(32) << 20;

// The pattern uploaded once, then one device-to-device copy per further pattern-sized piece.
DeviceBuffer tiled(Device device, size_t bytes, const void* pattern, size_t pattern_bytes, Stream stream) {
  DeviceBuffer b(device, bytes);
  const size_t first = std::min(bytes, pattern_bytes);
  b.upload(pattern, first, stream);
  for (size_t at = first; at < bytes; at += first)
    copy_bytes(static_cast<unsigned char*>(b.data()) + at, device, b.data(), device, std::min(first, bytes - at),
               stream);
  return b;
}

template <class T>
DeviceBuffer constant(Device device, size_t count, T value, Stream stream) {
  const std::vector<T> pattern(std::min(count, kPatternBytes / sizeof(T)), value);
  return tiled(device, count * sizeof(T), pattern.data(), pattern.size() * sizeof(T), stream);
}

}  // namespace

std::vector<uint16_t> noise_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const float f = float(int32_t(x >> 40) - (1 << 23)) / float(1 << 23);  // [-1, 1)
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    out[i] = uint16_t(bits >> 16);
  }
  return out;
}

DeviceBuffer noise_buffer(Device device, size_t bytes, uint64_t seed, Stream stream) {
  const size_t chunk = std::min(bytes, kPatternBytes);
  const std::vector<uint16_t> pattern = noise_bf16((chunk + 1) / 2, seed);
  return tiled(device, bytes, pattern.data(), chunk, stream);
}

DeviceBuffer f32_buffer(Device device, size_t count, float value, Stream stream) {
  return constant(device, count, value, stream);
}

DeviceBuffer bf16_buffer(Device device, size_t count, uint16_t bits, Stream stream) {
  return constant(device, count, bits, stream);
}

TensorView view_on(const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape) {
  TensorView v = TensorView::contiguous(b.data(), t, shape);
  v.device = b.device();
  return v;
}

}  // namespace attnzoo::bench
