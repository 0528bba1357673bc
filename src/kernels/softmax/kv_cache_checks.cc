// The cache-length and block-table checks shared by decode, paged prefill and MLA's latent cache. They run on
// every decode step, so messages are formatted only when a check fails.
#include <string>

#include "core/error.h"
#include "kernels/softmax/kv_cache_view.h"

namespace attnzoo {
namespace {
std::string str(int64_t v) { return std::to_string(v); }

// Rows a sequence may hold; checks the paged geometry first.
int64_t cache_capacity(const CacheLengthCheck& c, int64_t batch) {
  require(c.cache_seqlens != nullptr || batch == 0, "cache_seqlens", "is required");
  if (c.block_table == nullptr) return c.block_size;
  require(c.block_size >= 1, c.cache_name, "block_size (dim 1) must be >= 1");
  require(c.max_blocks_per_seq >= 1, "block_table", "must have at least one column");
  return c.max_blocks_per_seq * c.block_size;
}

// Sequence b, with tq new tokens, against a cache of `capacity` rows per sequence.
void check_sequence(const CacheLengthCheck& c, int64_t capacity, int64_t b, int64_t tq) {
  const bool paged = c.block_table != nullptr;
  const int64_t len = c.cache_seqlens[b];
  require(len >= tq, "cache_seqlens", [&] {
    return "entry " + str(b) + " is " + str(len) + ", but it counts the " + str(tq) +
           " new tokens too, so it must be >= " + str(tq);
  });
  require(len <= capacity, "cache_seqlens", [&] {
    return "entry " + str(b) + " is " + str(len) + ", beyond the cache capacity of " + str(capacity) +
           (paged ? " (max_blocks_per_seq * block_size)" : " (" + std::string(c.cache_name) + " dim 1)");
  });
  if (!paged) return;
  for (int64_t i = 0; i < (len + c.block_size - 1) / c.block_size; ++i) {
    const int64_t id = c.block_table[b * c.max_blocks_per_seq + i];
    require(id >= 0 && id < c.num_blocks, "block_table", [&] {
      return "entry [" + str(b) + ", " + str(i) + "] = " + str(id) + " is not a block of " + c.cache_name + " (0.." +
             str(c.num_blocks - 1) + ")";
    });
  }
}
}  // namespace

void check_cache_lengths(const CacheLengthCheck& c, const std::vector<int64_t>& new_tokens) {
  const int64_t capacity = cache_capacity(c, int64_t(new_tokens.size()));
  for (size_t b = 0; b < new_tokens.size(); ++b) check_sequence(c, capacity, int64_t(b), new_tokens[b]);
}

void check_cache_lengths(const CacheLengthCheck& c, int64_t batch, int64_t new_tokens) {
  const int64_t capacity = cache_capacity(c, batch);
  for (int64_t b = 0; b < batch; ++b) check_sequence(c, capacity, b, new_tokens);
}

}  // namespace attnzoo
