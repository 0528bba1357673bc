#include "engine/ngram_proposer.h"

#include <algorithm>

namespace attnzoo {

std::vector<int32_t> ngram_lookup(std::span<const int32_t> context, int64_t k, int64_t n_min, int64_t n_max) {
  const int64_t len = int64_t(context.size());
  if (k <= 0) return {};
  for (int64_t n = std::min(n_max, len - 1); n >= std::max<int64_t>(n_min, 1); --n) {
    const auto suffix = context.subspan(size_t(len - n));
    // A match must end before the suffix itself does, and leave at least one token after it to propose.
    for (int64_t start = 0; start + n < len; ++start) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      const int64_t from = start + n, count = std::min(k, len - from);
      return {context.begin() + from, context.begin() + from + count};
    }
  }
  return {};
}

}  // namespace attnzoo
