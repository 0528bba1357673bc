// The cache-length and block-table checks shared by decode, paged prefill and MLA's latent cache.
#include <string>

#include "core/error.h"
#include "kernels/softmax/kv_cache_view.h"

namespace attnzoo {
namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

void check_cache_lengths(const CacheLengthCheck& c, const std::vector<int64_t>& new_tokens) {
  const bool paged = c.block_table != nullptr;
  require(c.cache_seqlens != nullptr || new_tokens.empty(), "cache_seqlens", "is required");
  int64_t capacity = c.block_size;
  if (paged) {
    require(c.block_size >= 1, c.cache_name, "block_size (dim 1) must be >= 1");
    require(c.max_blocks_per_seq >= 1, "block_table", "must have at least one column");
    capacity = c.max_blocks_per_seq * c.block_size;
  }
  for (size_t b = 0; b < new_tokens.size(); ++b) {
    const int64_t len = c.cache_seqlens[b], tq = new_tokens[b];
    require(len >= tq, "cache_seqlens",
            "entry " + str(int64_t(b)) + " is " + str(len) + ", but it counts the " + str(tq) +
                " new tokens too, so it must be >= " + str(tq));
    require(len <= capacity, "cache_seqlens",
            "entry " + str(int64_t(b)) + " is " + str(len) + ", beyond the cache capacity of " + str(capacity) +
                (paged ? " (max_blocks_per_seq * block_size)" : " (" + std::string(c.cache_name) + " dim 1)"));
    if (!paged) continue;
    for (int64_t i = 0; i < (len + c.block_size - 1) / c.block_size; ++i) {
      const int64_t id = c.block_table[int64_t(b) * c.max_blocks_per_seq + i];
      require(id >= 0 && id < c.num_blocks, "block_table",
              "entry [" + str(int64_t(b)) + ", " + str(i) + "] = " + str(id) + " is not a block of " + c.cache_name +
                  " (0.." + str(c.num_blocks - 1) + ")");
    }
  }
}

}  // namespace attnzoo
