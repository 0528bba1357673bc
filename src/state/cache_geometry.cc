#include "state/cache_geometry.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "core/error.h"

namespace attnzoo {

int64_t default_pool_bytes() {
  int64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") available = kib * 1024;
  if (available <= 0) available = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
  return std::clamp<int64_t>(available / 4, int64_t(64) << 20, int64_t(16) << 30);
}

int64_t device_pool_bytes(Device device, double utilization) {
  const CudaMemoryInfo m = cuda_memory_info(device.index);
  const double in_use = double(m.total_bytes - m.free_bytes);
  const double budget = double(m.total_bytes) * utilization - in_use;
  auto mib = [](double b) { return std::to_string(int64_t(b / double(1 << 20))) + " MiB"; };
  if (budget < 1.0)
    throw PoolExhausted("gpu_memory_utilization: " + std::to_string(utilization) + " of " + device.str() + "'s " +
                        mib(double(m.total_bytes)) + " leaves nothing for the cache with " + mib(in_use) +
                        " in use (raise it, or free device memory)");
  return int64_t(budget);
}

CacheGeometry plan_cache(std::vector<CacheSpec> layers, const PoolOptions& options) {
  const DType kv = options.kv_dtype;
  require(kv == DType::f32 || kv == DType::bf16 || kv == DType::f16 || is_quantized_kv(kv), "kv_cache_dtype",
          std::string("must be float32, bfloat16, float16, int8 or float8_e4m3fn, got ") + dtype_name(kv));
  require(options.block_tokens >= 1 && options.block_tokens <= 4096, "block_size",
          "must be in [1, 4096], got " + std::to_string(options.block_tokens));
  require(options.max_sequences >= 1, "max_num_seqs", "must be at least 1");
  require(options.max_rollback_tokens >= 0, "max_rollback_tokens", "must be non-negative");
  require(options.snapshot_interval_blocks >= 0, "snapshot_interval_blocks", "must be non-negative");
  CacheGeometry g;
  require(options.gpu_memory_utilization > 0 && options.gpu_memory_utilization <= 1, "gpu_memory_utilization",
          "must be in (0, 1], got " + std::to_string(options.gpu_memory_utilization));
  g.options = options;
  if (g.options.bytes == 0)
    g.options.bytes = options.device.is_cpu() ? default_pool_bytes()
                                              : device_pool_bytes(options.device, options.gpu_memory_utilization);
  require(g.options.bytes > 0, "kv_cache_memory", "must be positive");
  g.specs = std::move(layers);
  g.block_tokens = options.block_tokens;
  g.snapshot_blocks = options.snapshot_interval_blocks > 0 ? options.snapshot_interval_blocks
                                                            : std::max<int64_t>(1, 256 / options.block_tokens);
  const int64_t B = options.block_tokens;
  for (auto& s : g.specs) {
    s.dtype = kv;
    // Slots stay 64-byte aligned so the state kernels' vector loads never split a cache line.
    g.slot_bytes = checked_add(g.slot_bytes, (s.fixed_bytes() + 63) / 64 * 64, "state slot");
  }
  g.layout = block_layout(g.specs, options.free_outside_window);
  for (int64_t j = 0; j < g.layout.slots; ++j) {
    g.slot_specs.push_back(g.specs[size_t(g.layout.groups[0].layers[size_t(j)])]);
    g.block_bytes =
        checked_add(g.block_bytes, checked_mul(B, g.slot_specs.back().bytes_per_token(), "kv block"), "kv block");
  }
  int64_t budget = g.options.bytes;
  if (g.slot_bytes > 0) {
    g.running_slots = std::min<int64_t>(options.max_sequences, budget / g.slot_bytes);
    if (g.running_slots < 1)
      throw PoolExhausted("kv_cache_memory: " + std::to_string(budget) + " bytes cannot hold one sequence's recurrent "
                          "state of " + std::to_string(g.slot_bytes) + " bytes");
    budget -= g.running_slots * g.slot_bytes;
  }
  // What is left goes to KV blocks; a model with both kinds keeps a quarter of it for state snapshots.
  int64_t snapshot_budget = 0;
  if (g.slot_bytes > 0 && options.prefix_caching) snapshot_budget = g.block_bytes > 0 ? budget / 4 : budget;
  g.snapshot_slots = g.slot_bytes > 0 ? snapshot_budget / g.slot_bytes : 0;
  budget -= g.snapshot_slots * g.slot_bytes;
  g.num_blocks = g.block_bytes > 0 ? std::min<int64_t>(budget / g.block_bytes, (int64_t(1) << 31) - 1) : 0;
  if (g.block_bytes > 0 && g.num_blocks < 1) {
    // In bytes: a tiny pool's sizes round to "0 MiB".
    std::string why = "kv_cache_memory: " + std::to_string(g.options.bytes) + " bytes cannot hold one KV block of " +
                      std::to_string(g.block_bytes) + " bytes (" + std::to_string(B) + " tokens)";
    if (g.slot_bytes > 0)
      why += " after the recurrent-state slots took " + std::to_string(g.options.bytes - budget) + " bytes (" +
             std::to_string(g.num_slots()) + " slots of " + std::to_string(g.slot_bytes) + ")";
    throw PoolExhausted(why);
  }
  // bytes() multiplies without checks: the whole pool's size is checked once, here.
  checked_add(checked_mul(g.num_blocks, g.block_bytes, "pool"), checked_mul(g.num_slots(), g.slot_bytes, "pool"),
              "pool");
  return g;
}

}  // namespace attnzoo
