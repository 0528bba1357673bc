#pragma once
// A gather's or a scatter's index for the row-copy kernels' emulated tests: distinct rows in a shuffled order (the
// pool's slots of a batch), on the host for the checks and in emulated device memory for the kernel.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

struct RowIndex {
  bool used;
  std::vector<int32_t> host;  // empty when unused
  DeviceMemory device;

  // `rows` of the `of` rows when `used`; draws nothing from `rng` otherwise.
  RowIndex(bool used, int64_t rows, int64_t of, std::mt19937& rng)
      : used(used),
        host(used ? shuffled(rows, of, rng) : std::vector<int32_t>{}),
        device(std::max<size_t>(4, host.size() * 4)) {
    std::copy(host.begin(), host.end(), reinterpret_cast<int32_t*>(device.data()));
  }
  // The kernel's and its host twin's pointers: null when unused (a dense side).
  const int32_t* device_ptr() const {
    return used ? reinterpret_cast<const int32_t*>(device.data()) : nullptr;
  }
  const int32_t* host_ptr() const { return used ? host.data() : nullptr; }
  int64_t operator[](int64_t r) const { return host[size_t(r)]; }

 private:
  static std::vector<int32_t> shuffled(int64_t rows, int64_t of, std::mt19937& rng) {
    std::vector<int32_t> v(static_cast<size_t>(of));
    std::iota(v.begin(), v.end(), 0);
    std::shuffle(v.begin(), v.end(), rng);
    v.resize(size_t(rows));
    return v;
  }
};

}  // namespace attnzoo::cuda_emulation
