#pragma once
// Logits for the sampler tests: N(0, 2) draws from std::mt19937(seed), spread enough that top-k / top-p / min-p
// cut and no two tokens tie.
#include <cstdint>
#include <random>
#include <vector>

namespace attnzoo::testing {

inline std::vector<float> random_logits(size_t count, uint32_t seed) {
  std::vector<float> logits(count);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (float& x : logits) x = normal(rng);
  return logits;
}

}  // namespace attnzoo::testing
