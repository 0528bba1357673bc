#include "models/deepseek_moe_from_checkpoint.h"

#include "models/decoder.h"
#include "models/describe.h"

namespace attnzoo {

GatedMlp load_gated_mlp(const ModelFiles& files, const std::string& prefix, const GatedMlpNames& names,
                        int64_t inter, int64_t hidden, Activation act, DType store, WeightBytes* owned) {
  return GatedMlp(load_linear(files, prefix + names.gate, inter, hidden, store, owned),
                  load_linear(files, prefix + names.up, inter, hidden, store, owned),
                  load_linear(files, prefix + names.down, hidden, inter, store, owned), act, prefix);
}

DeepseekMoeShape read_deepseek_moe_shape(const Config& c) {
  DeepseekMoeShape s;
  s.num_experts = c.get_int_or("n_routed_experts", 0);
  DeepseekMoeConfig& moe = s.config;
  moe.top_k = c.get_int_or("num_experts_per_tok", 1);
  moe.n_group = c.get_int_or("n_group", 1);
  moe.topk_group = c.get_int_or("topk_group", 1);
  moe.norm_topk_prob = c.get_bool_or("norm_topk_prob", true);
  moe.routed_scaling_factor = float(c.get_float_or("routed_scaling_factor", 1.0));
  s.n_shared = c.get_int_or("n_shared_experts", 0);
  return s;
}

std::unique_ptr<DeepseekMoe> load_deepseek_moe(const ModelFiles& files, const DeepseekMoeShape& shape,
                                               const std::string& prefix, const GatedMlpNames& expert_names,
                                               int64_t inter, int64_t hidden, Activation act, DType store,
                                               WeightBytes* owned, const std::string& bias_suffix) {
  const int64_t n = shape.num_experts;
  std::vector<GatedMlp> experts;
  for (int64_t e = 0; e < n; ++e)
    experts.push_back(load_gated_mlp(files, prefix + ".experts." + std::to_string(e), expert_names, inter, hidden,
                                     act, store, owned));
  std::optional<GatedMlp> shared;
  if (shape.n_shared > 0)
    shared.emplace(load_gated_mlp(files, prefix + ".shared_experts", kGatedMlpProjNames, inter * shape.n_shared,
                                  hidden, act, store, owned));
  // The router stays f32 whatever the weight precision: transformers keeps gate.weight in f32 too, and a rounded
  // router can pick other experts.
  return std::make_unique<DeepseekMoe>(shape.config, load_linear(files, prefix + ".gate", n, hidden, DType::f32, owned),
                                       optional_weight(files, prefix + bias_suffix, {n}),
                                       std::move(experts), std::move(shared), prefix);
}

int64_t deepseek_ffn_parameter_count(const Config& c, const DeepseekMoeShape& shape, bool sparse, int64_t hidden,
                                     const char* expert_inter_key) {
  if (!sparse) return (3 * linear_params(c.get_int("intermediate_size"), hidden)).value();
  const int64_t n = shape.num_experts, inter = c.get_int(expert_inter_key);
  return (Checked(n) * 3 * linear_params(inter, hidden) +
          (shape.n_shared > 0 ? 3 * (Checked(inter) * shape.n_shared * hidden) : 0) + linear_params(n, hidden) +
          (shape.config.scoring == DeepseekScoring::sigmoid ? n : 0))  // router + e_score_correction_bias (V3)
      .value();
}

}  // namespace attnzoo
