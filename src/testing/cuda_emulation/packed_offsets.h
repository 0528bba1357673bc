#pragma once
// The emulated twin of cuda_linear::launch_with_offsets (packed_offsets_upload.cuh): a launch over packed
// sequences gets their offsets in an emulated device allocation that lives through the launch; null when there
// are none.
#include <cstdint>
#include <cstring>
#include <vector>

#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

template <class Launch>
void launch_with_offsets(const std::vector<int64_t>& offsets, const int64_t** slot, Launch&& launch) {
  if (offsets.empty()) {
    *slot = nullptr;
    return launch();
  }
  DeviceMemory memory(offsets.size() * sizeof(int64_t));
  std::memcpy(memory.data(), offsets.data(), memory.size());
  *slot = reinterpret_cast<const int64_t*>(memory.data());
  launch();
}

}  // namespace attnzoo::cuda_emulation
