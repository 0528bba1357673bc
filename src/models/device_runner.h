#pragma once
// The compute of a model whose memory pool lives on a GPU: Model::load makes one from the architecture's CPU
// model (Model::make_device_runner) and forward() hands it what it would hand run(). The bookkeeping above it
// (prefix cache, pieces, block reservation) is the CPU model's, unchanged.
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "layers/batch.h"
#include "state/cache_storage.h"

namespace attnzoo {

class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  // Model::run's contract on the device: `batch` has its memory fields filled and `storage` is current (its
  // queued moves flushed). Returns the logits where the head wrote them, f32 [rows.size(), vocab] in the
  // runner's device memory (row i for packed token rows[i]; an empty view when rows is), ready in order on the
  // current stream and valid until the next run: whether any of it comes to the host is the caller's choice (the
  // engine samples there and copies only the ids back).
  virtual TensorView run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage) const = 0;
};

}  // namespace attnzoo
