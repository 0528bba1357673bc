#pragma once
// The memory moves the cache manager's bookkeeping decides and the cache storage performs: the seam between the
// two halves of the memory pool (vLLM's blocks_to_copy, with state slots beside the blocks). The manager never
// touches cache memory, so the same bookkeeping serves host memory and device memory, where a move is a
// stream-ordered copy. Moves run in the order they were decided: a slot zeroed and then copied into is not the
// same as one copied into and then zeroed.
#include <cstdint>

namespace attnzoo {

struct CacheOp {
  enum class Kind : uint8_t {
    copy_block,  // every paged tensor's (and scale tensor's) row `from` into row `to` (copy on write)
    copy_state,  // every state layer's slot `from` into slot `to` (fork, snapshot, checkpoint, restore)
    zero_state,  // every state layer's slot `to` to zeros (a fresh or reset sequence); `from` unused
  };
  Kind kind = Kind::copy_block;
  int32_t from = -1, to = -1;
  bool operator==(const CacheOp&) const = default;
};

}  // namespace attnzoo
