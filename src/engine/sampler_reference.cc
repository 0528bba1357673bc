#include "engine/sampler_reference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace attnzoo {

std::vector<double> sampling_distribution_reference(std::span<const float> logits, std::span<const int32_t> context,
                                                    const SamplingParams& p) {
  const size_t V = logits.size();
  std::vector<double> x(logits.begin(), logits.end());
  std::map<int32_t, int> counts;
  for (int32_t id : context) ++counts[id];
  for (const auto& [id, count] : counts) {
    double& l = x[size_t(id)];
    // The penalty is applied to the f32 logit in f32 by the sampler; do the same so ties and signs agree.
    float lf = float(l);
    if (p.repetition_penalty != 1.f) lf = lf > 0.f ? lf / p.repetition_penalty : lf * p.repetition_penalty;
    lf -= p.presence_penalty + p.frequency_penalty * float(count);
    l = lf;
  }
  std::vector<double> probs(V, 0.0);
  if (p.temperature == 0.f) {
    probs[size_t(std::max_element(x.begin(), x.end()) - x.begin())] = 1.0;
    return probs;
  }
  for (double& l : x) l = double(float(float(l) * (1.f / p.temperature)));  // f32 scaling, as the sampler

  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] > x[b]; });
  std::vector<bool> keep(V, true);
  if (p.top_k > 0 && size_t(p.top_k) < V) {
    const double kth = x[order[size_t(p.top_k) - 1]];
    for (size_t i = 0; i < V; ++i) keep[i] = x[i] >= kth;
  }
  const double max = x[order[0]];
  auto mass_of_kept = [&] {
    double z = 0;
    for (size_t i = 0; i < V; ++i)
      if (keep[i]) z += std::exp(x[i] - max);
    return z;
  };
  if (p.top_p < 1.f) {
    // HF: drop the tail (ascending cumulative probability <= 1 - top_p), always keeping the best token.
    const double z = mass_of_kept();
    double before = 0;
    for (size_t r = 0; r < V; ++r) {
      const size_t i = order[r];
      if (!keep[i]) continue;
      if (r > 0 && before >= p.top_p * z) keep[i] = false;
      before += std::exp(x[i] - max);
    }
  }
  if (p.min_p > 0.f) {
    for (size_t i = 0; i < V; ++i)
      if (std::exp(x[i] - max) < p.min_p) keep[i] = false;
  }
  const double z = mass_of_kept();
  for (size_t i = 0; i < V; ++i) probs[i] = keep[i] ? std::exp(x[i] - max) / z : 0.0;
  return probs;
}

}  // namespace attnzoo
