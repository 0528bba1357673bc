#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i) r.top.push_back({ids[i], float(double(logits[size_t(ids[i])]) - log_z)});
  return r;
}

}  // namespace attnzoo
