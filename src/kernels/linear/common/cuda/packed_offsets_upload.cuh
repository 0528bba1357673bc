#pragma once
// The linear launchers' one piece of metadata: a packed batch's sequence offsets (token rows, N + 1 of them),
// copied to the device in stream order and freed after the kernel; a padded batch has none to copy.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/cuda_check.h"

namespace attnzoo::cuda_linear {

// Runs `launch` with `*slot` pointing at the device copy of `offsets` (left null when `offsets` is empty).
template <class Launch>
void launch_with_offsets(const std::vector<int64_t>& offsets, cudaStream_t stream, const int64_t** slot,
                         Launch&& launch) {
  if (offsets.empty()) return launch();
  const size_t bytes = offsets.size() * sizeof(int64_t);
  StreamScratch scratch(bytes, stream);
  scratch.upload(offsets.data(), bytes);
  *slot = reinterpret_cast<const int64_t*>(scratch.data());
  launch();
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo::cuda_linear
