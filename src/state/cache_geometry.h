#pragma once
// How a memory pool's byte budget is cut, decided once from the layers' CacheSpecs and the PoolOptions: the KV
// block size and count, the recurrent-state slots (running sequences first, then prefix-cache snapshots) and where
// each layer's memory sits. Both halves of the pool are built from it: the cache manager (which block and slot
// belongs to whom) and the cache storage (the bytes), so they can never disagree on a size.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "state/cache_spec.h"

namespace attnzoo {

// The pool cannot hold what was asked; nothing was changed. Python: attnzoo.PoolExhaustedError (a MemoryError).
struct PoolExhausted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PoolOptions {
  int64_t block_tokens = 16;
  DType kv_dtype = DType::f32;  // element type of every paged layer (f32, bf16, f16; i8 / f8_e4m3 + scales)
  int64_t bytes = 0;            // budget; 0: default_pool_bytes() on the CPU, device_pool_bytes() on a GPU
  // Where the cache memory lives (CacheStorage); the bookkeeping is on the host either way.
  Device device{};
  // A GPU pool's default budget: this fraction of the device's memory, less what is in use when the pool is
  // made (weights loaded first), as vLLM's gpu_memory_utilization. In (0, 1].
  double gpu_memory_utilization = 0.9;
  int64_t max_sequences = 64;   // recurrent-state slots for running sequences (models with state layers)
  bool prefix_caching = true;
  // Recurrent state is snapshotted every this many blocks of a sequence (a prefix hit on a hybrid model can only
  // end at such a boundary); 0 picks max(1, 256 / block_tokens).
  int64_t snapshot_interval_blocks = 0;
  // Sliding-window layers give back the blocks their window left (false: every layer keeps every block in one
  // block table, as before windows freed anything; vLLM's disable_hybrid_kv_cache_manager: for comparisons).
  bool free_outside_window = true;
  // Windowed groups keep this many more tokens' blocks so a speculative rollback of up to this many tokens still
  // finds its window. Speculation raises it to k + 1 itself (CacheManager::keep_rollback_tokens, from the
  // scheduler and generate()): front ends need not set it.
  int64_t max_rollback_tokens = 0;
  // Tests: non-zero hands blocks out in an order shuffled by this seed (no layer may assume adjacent blocks).
  uint64_t shuffle_seed = 0;
};

// A quarter of the memory available now, at least 64 MiB and at most 16 GiB.
int64_t default_pool_bytes();
// `utilization` of GPU `device`'s memory less what is in use now; PoolExhausted naming gpu_memory_utilization
// when that leaves nothing, DeviceError when the device is not present.
int64_t device_pool_bytes(Device device, double utilization);

struct CacheGeometry {
  PoolOptions options;  // as given, `bytes` resolved (the budget the rest was cut from)
  std::vector<CacheSpec> specs;  // per layer, with the pool's KV dtype
  BlockLayout layout;
  // The paged tensors of one block row: group 0's layers' specs (the widest group; the others' layers are alike).
  std::vector<CacheSpec> slot_specs;
  int64_t block_tokens = 0;
  int64_t block_bytes = 0;  // one block across every slot, scales included; 0 without paged layers
  int64_t slot_bytes = 0;   // one state slot across every state layer (each 64-byte aligned); 0 without state
  int64_t num_blocks = 0;
  int64_t running_slots = 0, snapshot_slots = 0;
  int64_t snapshot_blocks = 1;  // blocks between state snapshots

  int64_t num_slots() const { return running_slots + snapshot_slots; }
  int64_t bytes() const { return num_blocks * block_bytes + num_slots() * slot_bytes; }
  // Floats between one state slot of layer `l` and the next (its fixed bytes rounded up to 64).
  int64_t state_stride(size_t l) const { return (specs[l].fixed_bytes() + 63) / 64 * 64 / int64_t(sizeof(float)); }
};

// ArgumentError for bad options (naming them); PoolExhausted when the budget cannot hold one block or one slot.
CacheGeometry plan_cache(std::vector<CacheSpec> layers, const PoolOptions& options);

}  // namespace attnzoo
