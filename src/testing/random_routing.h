#pragma once
// Random MoE routings for the routed kernels' tests: each token's k distinct experts drawn in proportion to a
// per-expert load (a load of 0 leaves that expert idle), each with a weight in [0.05, 1).
#include <cstdint>
#include <random>
#include <vector>

#include "layers/moe.h"

namespace attnzoo::testing {

// `load` must leave at least `top_k` experts with a positive load.
inline MoeRouting draw_routing(int64_t tokens, int64_t top_k, const std::vector<double>& load, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> weight(0.05f, 1.f);
  MoeRouting r;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> left = load;
    for (int64_t j = 0; j < top_k; ++j) {
      std::discrete_distribution<int32_t> pick(left.begin(), left.end());
      const int32_t e = pick(rng);
      left[size_t(e)] = 0.0;  // distinct experts
      r.experts.push_back(e);
      r.weights.push_back(weight(rng));
    }
  }
  return r;
}

}  // namespace attnzoo::testing
