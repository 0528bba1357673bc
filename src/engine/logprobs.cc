#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace attnzoo {

RowLogprobs row_logprobs(std::span<const float> logits, int32_t token, int64_t top) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - double(max));
  const double log_z = double(max) + std::log(sum);
  RowLogprobs r;
  r.chosen = float(double(logits[size_t(token)]) - log_z);
  const size_t k = size_t(std::min<int64_t>(top, int64_t(logits.size())));
  if (k == 0) return r;
  // The k best in one pass over the row with a heap of k (its front the worst kept), instead of a vocabulary-sized
  // index array per token.
  const auto better = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(k);
  for (int32_t id = 0; id < int32_t(logits.size()); ++id) {
    if (best.size() < k) {
      best.push_back(id);
      std::push_heap(best.begin(), best.end(), better);
    } else if (better(id, best.front())) {
      std::pop_heap(best.begin(), best.end(), better);
      best.back() = id;
      std::push_heap(best.begin(), best.end(), better);
    }
  }
  std::sort_heap(best.begin(), best.end(), better);  // best first
  for (int32_t id : best) r.top.push_back({id, float(double(logits[size_t(id)]) - log_z)});
  return r;
}

}  // namespace attnzoo
