// row_logprobs against a plain reference: log-softmax in double and a full sort by (logit desc, id asc).
#include "engine/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace attnzoo {
namespace {

TEST(RowLogprobs, TopKEqualsAFullSortWithTiesByLowerId) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(-8, 8);  // few distinct values: many ties
  for (int V : {1, 7, 97, 1000}) {
    std::vector<float> logits(static_cast<size_t>(V));
    for (auto& l : logits) l = 0.5f * float(level(rng));
    double max = *std::max_element(logits.begin(), logits.end()), z = 0;
    for (float l : logits) z += std::exp(double(l) - max);
    const double log_z = max + std::log(z);
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    for (int64_t top : {int64_t(0), int64_t(1), int64_t(5), int64_t(V), int64_t(V) + 3}) {
      SCOPED_TRACE("V " + std::to_string(V) + " top " + std::to_string(top));
      const int32_t token = int32_t(V / 2);
      const RowLogprobs r = row_logprobs(logits, token, top);
      EXPECT_NEAR(r.chosen, logits[size_t(token)] - log_z, 1e-6);
      ASSERT_EQ(r.top.size(), size_t(std::min<int64_t>(top, V)));
      for (size_t i = 0; i < r.top.size(); ++i) {
        EXPECT_EQ(r.top[i].token, order[i]);
        EXPECT_NEAR(r.top[i].logprob, logits[size_t(order[i])] - log_z, 1e-6);
      }
    }
  }
}

}  // namespace
}  // namespace attnzoo
