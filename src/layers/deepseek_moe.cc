#include "layers/deepseek_moe.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/convert.h"
#include "core/error.h"
#include "core/threads.h"

namespace attnzoo {
namespace {

void check_config(const DeepseekMoeConfig& c, int64_t E) {
  require(c.top_k >= 1 && c.top_k <= E, "num_experts_per_tok",
          "must be in [1, " + std::to_string(E) + "], got " + std::to_string(c.top_k));
  require(c.n_group >= 1 && E % c.n_group == 0, "n_group",
          "must divide n_routed_experts (" + std::to_string(E) + "), got " + std::to_string(c.n_group));
  require(c.topk_group >= 1 && c.topk_group <= c.n_group, "topk_group",
          "must be in [1, n_group = " + std::to_string(c.n_group) + "], got " + std::to_string(c.topk_group));
  require(c.top_k <= c.topk_group * (E / c.n_group), "num_experts_per_tok",
          "exceeds the experts of the topk_group kept groups");
  require(std::isfinite(c.routed_scaling_factor), "routed_scaling_factor", "must be finite");
}

// Indices 0..n-1 with the k largest `score` first (descending, ties to the lower index).
void top_indices(const std::vector<float>& score, int64_t k, std::vector<int32_t>& order) {
  order.resize(score.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
  });
}

}  // namespace

void route_grouped_top_k(const float* logits, const float* correction_bias, int64_t T, int64_t E,
                                 const DeepseekMoeConfig& c, MoeRouting& out) {
  check_config(c, E);
  const int64_t k = c.top_k, G = c.n_group, per_group = E / G;
  out.experts.assign(size_t(T * k), 0);
  out.weights.assign(size_t(T * k), 0.f);
  std::vector<float> s(static_cast<size_t>(E)), choice(static_cast<size_t>(E)), group_score(static_cast<size_t>(G));
  std::vector<int32_t> group_order, expert_order;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits + t * E;
    if (c.scoring == DeepseekScoring::sigmoid) {
      for (int64_t e = 0; e < E; ++e) s[size_t(e)] = 1.f / (1.f + std::exp(-row[e]));
    } else {
      const float top = *std::max_element(row, row + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += s[size_t(e)] = std::exp(row[e] - top);
      for (int64_t e = 0; e < E; ++e) s[size_t(e)] = float(s[size_t(e)] / sum);
    }
    for (int64_t e = 0; e < E; ++e) choice[size_t(e)] = s[size_t(e)] + (correction_bias ? correction_bias[e] : 0.f);
    // A group's score: its two best choice scores (its only one when groups hold a single expert), or its best.
    for (int64_t g = 0; g < G; ++g) {
      float best = -std::numeric_limits<float>::infinity(), second = best;
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        const float v = choice[size_t(e)];
        if (v > best) {
          second = best;
          best = v;
        } else if (v > second) {
          second = v;
        }
      }
      group_score[size_t(g)] = per_group >= 2 && c.group_score == DeepseekGroupScore::top2_sum ? best + second : best;
    }
    top_indices(group_score, c.topk_group, group_order);
    std::vector<bool> kept(size_t(G), false);
    for (int64_t j = 0; j < c.topk_group; ++j) kept[size_t(group_order[size_t(j)])] = true;
    for (int64_t e = 0; e < E; ++e)
      if (!kept[size_t(e / per_group)]) choice[size_t(e)] = -std::numeric_limits<float>::infinity();
    top_indices(choice, k, expert_order);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += s[size_t(expert_order[size_t(j)])];
    const double denom = c.norm_topk_prob ? sum + c.norm_epsilon : 1.0;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = expert_order[size_t(j)];
      out.experts[size_t(t * k + j)] = e;
      out.weights[size_t(t * k + j)] = float(double(s[size_t(e)]) / denom * c.routed_scaling_factor);
    }
  }
}

template <class Expert>
BasicDeepseekMoe<Expert>::BasicDeepseekMoe(const DeepseekMoeConfig& config, Linear router,
                                           const TensorView& correction_bias, std::vector<Expert> experts,
                                           std::optional<Expert> shared_experts, const std::string& name)
    : config_(config), router_(std::move(router)), experts_(std::move(experts)), shared_(std::move(shared_experts)) {
  const int64_t E = num_experts();
  require(E > 0, (name + ".experts").c_str(), "needs at least one expert");
  check_config(config_, E);
  const int64_t H = experts_[0].hidden();
  require(router_.out_features() == E && router_.in_features() == H, (name + ".gate.weight").c_str(),
          "expected [" + std::to_string(E) + ", " + std::to_string(H) + "], got " + router_.shape_str());
  for (int64_t e = 0; e < E; ++e)
    require(experts_[size_t(e)].hidden() == H, (name + ".experts." + std::to_string(e)).c_str(),
            "hidden size differs from expert 0's");
  if (shared_)
    require(shared_->hidden() == H, (name + ".shared_experts").c_str(), "hidden size differs from the experts'");
  bias_.assign(size_t(E), 0.f);
  if (correction_bias.data) {
    const std::string bn = name + ".gate.e_score_correction_bias";
    require(correction_bias.ndim == 1 && correction_bias.shape[0] == E && correction_bias.is_contiguous(), bn.c_str(),
            "expected a contiguous [" + std::to_string(E) + "] tensor, got " + correction_bias.shape_str());
    require(correction_bias.dtype == DType::f32 || correction_bias.dtype == DType::bf16 ||
                correction_bias.dtype == DType::f16,
            bn.c_str(), "must be f32, bf16 or f16");
    convert_to_f32(correction_bias.data, correction_bias.dtype, bias_.data(), bias_.size());
  }
}

template <class Expert>
uint64_t BasicDeepseekMoe<Expert>::weight_bytes() const {
  uint64_t b = router_.weight_bytes();
  for (const auto& e : experts_) b += e.weight_bytes();
  if (shared_) b += shared_->weight_bytes();
  return b;
}

template <class Expert>
uint64_t BasicDeepseekMoe<Expert>::decode_weight_bytes() const {
  uint64_t b = router_.weight_bytes() + uint64_t(config_.top_k) * experts_[0].weight_bytes();
  if (shared_) b += shared_->weight_bytes();
  return b;
}

template <class Expert>
void BasicDeepseekMoe<Expert>::route(const float* x, int64_t T, MoeRouting& out) const {
  const int64_t E = num_experts();
  std::vector<float> logits(size_t(T * E));
  router_.forward(x, T, logits.data());
  route_grouped_top_k(logits.data(), bias_.data(), T, E, config_, out);
}

template <class Expert>
void BasicDeepseekMoe<Expert>::forward(const float* x, int64_t T, float* out) const {
  MoeRouting routing;
  if (!shared_) {
    route(x, T, routing);
  } else {
    // The router rides in the shared expert's gate / up (or up) call: one quantization of x for all of them.
    const int64_t E = num_experts();
    std::vector<float> logits(size_t(T * E));
    const Linear::SharedOutput beside[1] = {{&router_, logits.data()}};
    shared_->forward(x, T, out, beside);
    route_grouped_top_k(logits.data(), bias_.data(), T, E, config_, routing);
  }
  run_routed_experts(experts_, routing, config_.top_k, x, T, out, /*accumulate=*/shared_.has_value());
}

template class BasicDeepseekMoe<GatedMlp>;
template class BasicDeepseekMoe<PlainMlp>;

}  // namespace attnzoo
