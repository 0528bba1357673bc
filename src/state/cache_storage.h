#pragma once
// The memory half of a memory pool: the bytes a CacheGeometry lays out on its device (PoolOptions::device), one
// allocation holding every paged tensor ([num_blocks, block_tokens, heads, head_dim] per block-row slot, scales
// first on int8 / fp8 pools) and every state layer's slab of slots. On the CPU that is a reserved mapping; on a
// GPU one device allocation, and the moves are copies and memsets ordered on the caller's current stream, so they
// land before the kernels the same step launches after them. It knows nothing of sequences: it hands each layer its LayerMemory and performs
// the moves the cache manager decided (CacheOp), in order. The model (the runner) owns it; the bookkeeping stays
// with whoever schedules, so cache memory can live on a device while the bookkeeping runs on the host.
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "core/device.h"
#include "state/cache_geometry.h"
#include "state/cache_ops.h"
#include "state/layer_memory.h"

namespace attnzoo {

class CacheStorage {
 public:
  // PoolExhausted when the memory cannot be had; DeviceError for an absent device or a build without CUDA.
  explicit CacheStorage(const CacheGeometry& geometry);
  ~CacheStorage();
  CacheStorage(const CacheStorage&) = delete;
  CacheStorage& operator=(const CacheStorage&) = delete;

  LayerMemory layer(int64_t l) const { return layers_[size_t(l)]; }
  int64_t num_layers() const { return int64_t(layers_.size()); }
  int64_t bytes() const { return mapped_bytes_; }
  Device device() const { return device_; }
  // Performs the moves in order (on a GPU: queued on the calling thread's current stream). Thread-safe: two
  // callers' moves never interleave.
  void apply(std::span<const CacheOp> ops);

 private:
  void copy_block(int32_t from, int32_t to);
  void copy_state(int32_t from, int32_t to);
  void zero_state(int32_t slot);

  std::vector<LayerMemory> layers_;
  std::vector<LayerMemory> slots_;  // the paged tensors of each block-row slot (what a block copy copies)
  Device device_{};
  uint8_t* base_ = nullptr;  // the host mapping, or device_'s allocation in device_memory_
  DeviceBuffer device_memory_;
  int64_t mapped_bytes_ = 0;
  Stream stream_{};  // the stream apply() runs on (mu_ held)
  std::mutex mu_;
};

}  // namespace attnzoo
