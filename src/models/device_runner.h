#pragma once
// The compute of a model whose memory pool lives on a GPU: Model::load makes one from the architecture's CPU
// model (Model::make_device_runner) and forward() hands it what it would hand run(). The bookkeeping above it
// (prefix cache, pieces, block reservation) is the CPU model's, unchanged.
#include <cstdint>
#include <span>

#include "layers/batch.h"
#include "state/cache_storage.h"

namespace attnzoo {

class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  // Model::run's contract on the device: `batch` has its memory fields filled and `storage` is current (its
  // queued moves flushed); logits row i (host memory, [rows.size(), vocab]) is for packed token rows[i].
  virtual void run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage,
                   float* logits) const = 0;
};

}  // namespace attnzoo
