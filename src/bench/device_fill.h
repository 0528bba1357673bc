#pragma once
// Device inputs for the CUDA table: seeded bf16 noise and constants, filled without generating gigabytes on the
// host (one pattern of at most 32 MiB uploaded, then copied on the device). Work on any device, the CPU
// included, so the table's host-side paths run in `make test`.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace attnzoo::bench {

// bf16 values in [-1, 1) from a 64-bit LCG.
std::vector<uint16_t> noise_bf16(size_t n, uint64_t seed);
// `bytes` of bf16 noise (read as one-byte values by int8 / e4m3 caches: finite either way).
DeviceBuffer noise_buffer(Device device, size_t bytes, uint64_t seed, Stream stream);
// `count` copies of one f32 value, or of one bf16 value given as its bits.
DeviceBuffer f32_buffer(Device device, size_t count, float value, Stream stream);
DeviceBuffer bf16_buffer(Device device, size_t count, uint16_t bits, Stream stream);

TensorView view_on(const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape);

}  // namespace attnzoo::bench
