#pragma once
// DeepSeek's mixture of experts (V3: sigmoid router with grouped top-k and a bias that only steers the choice;
// V2: softmax router, greedy or group-limited greedy top-k).
//   s = sigmoid(gate(x)) (V3) or softmax(gate(x)) over all E (V2)  (gate held in f32, as transformers keeps it)
//   c = s + e_score_correction_bias (V3; V2 has none)
//   groups: E experts in n_group equal groups, each scored by the sum of its two largest c (V3) or by its largest
//   (V2's group_limited_greedy); the topk_group best groups stay, experts of the others are masked out; the top_k
//   remaining c pick the experts (V2's greedy: n_group 1, every expert stays)
//   weights = s of the chosen experts (not c), / (their sum + norm_epsilon) when norm_topk_prob, * routed_scaling_factor
//   out = sum_j weights_j * expert_j(x) + shared_experts(x)
// Each expert (and the shared experts, fused as one wider MLP in the checkpoint) is a gated MLP; Nemotron-H's MoE
// layers route the same way over ungated relu² MLPs (NemotronHMoe).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/moe.h"

namespace attnzoo {

enum class DeepseekScoring : uint8_t { sigmoid, softmax };
enum class DeepseekGroupScore : uint8_t { top2_sum, max };

struct DeepseekMoeConfig {
  DeepseekScoring scoring = DeepseekScoring::sigmoid;
  DeepseekGroupScore group_score = DeepseekGroupScore::top2_sum;
  int64_t top_k = 1;
  int64_t n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  double norm_epsilon = 1e-20;  // added to the chosen scores' sum before normalizing (LFM2-MoE: 1e-6)
};

// Routing as above from router logits [T, E] and the correction bias [E]; ties go to the lower index (group or
// expert). Slots in descending choice score c. Validates the config against E (ArgumentError naming the key).
void route_grouped_top_k(const float* logits, const float* correction_bias, int64_t T, int64_t E,
                                 const DeepseekMoeConfig& config, MoeRouting& out);

// Expert: GatedMlp (DeepSeek-V3, Kimi) or PlainMlp (Nemotron-H); instantiated for both in deepseek_moe.cc.
template <class Expert>
class BasicDeepseekMoe : public FeedForward {
 public:
  // router [E, hidden]; correction_bias [E] (f32/bf16/f16, widened once; an empty view means zeros); experts: E
  // MLPs of one hidden size; shared_experts optional. Errors name `name`.
  BasicDeepseekMoe(const DeepseekMoeConfig& config, Linear router, const TensorView& correction_bias,
                   std::vector<Expert> experts, std::optional<Expert> shared_experts, const std::string& name);

  int64_t num_experts() const { return int64_t(experts_.size()); }
  const DeepseekMoeConfig& config() const { return config_; }
  const Linear& router() const { return router_; }
  const std::vector<float>& correction_bias() const { return bias_; }  // [E], zeros when the checkpoint has none
  const std::vector<Expert>& experts() const { return experts_; }
  const std::optional<Expert>& shared_experts() const { return shared_; }
  uint64_t weight_bytes() const override;
  // Router, top_k experts and the shared experts: what one decode token streams.
  uint64_t decode_weight_bytes() const override;
  void forward(const float* x, int64_t T, float* out) const override;
  // The routing forward() uses, for tests.
  void route(const float* x, int64_t T, MoeRouting& out) const;

 private:
  DeepseekMoeConfig config_;
  Linear router_;
  std::vector<float> bias_;
  std::vector<Expert> experts_;
  std::optional<Expert> shared_;
};

using DeepseekMoe = BasicDeepseekMoe<GatedMlp>;
using NemotronHMoe = BasicDeepseekMoe<PlainMlp>;

}  // namespace attnzoo
