#include "models/deepseek_moe_from_checkpoint.h"

#include "models/decoder.h"
#include "models/describe.h"

namespace attnzoo {

GatedMlp load_gated_mlp(const ModelFiles& files, const std::string& prefix, const GatedMlpNames& names,
                        int64_t inter, int64_t hidden, Activation act, DType store, uint64_t* owned) {
  return GatedMlp(load_linear(files, prefix + names.gate, inter, hidden, store, owned),
                  load_linear(files, prefix + names.up, inter, hidden, store, owned),
                  load_linear(files, prefix + names.down, hidden, inter, store, owned), act, prefix);
}

std::unique_ptr<DeepseekMoe> load_deepseek_moe(const ModelFiles& files, const DeepseekMoeShape& shape,
                                               const std::string& prefix, const GatedMlpNames& expert_names,
                                               int64_t inter, int64_t hidden, Activation act, DType store,
                                               uint64_t* owned) {
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
                                       optional_weight(files, prefix + ".gate.e_score_correction_bias", {n}),
                                       std::move(experts), std::move(shared), prefix);
}

int64_t deepseek_ffn_parameter_count(const Config& c, const DeepseekMoeShape& shape, bool sparse, int64_t hidden) {
  if (!sparse) return (3 * linear_params(c.get_int("intermediate_size"), hidden)).value();
  const int64_t n = shape.num_experts, inter = c.get_int("moe_intermediate_size");
  return (Checked(n) * 3 * linear_params(inter, hidden) +
          (shape.n_shared > 0 ? 3 * (Checked(inter) * shape.n_shared * hidden) : 0) + linear_params(n, hidden) +
          (shape.config.scoring == DeepseekScoring::sigmoid ? n : 0))  // router + e_score_correction_bias (V3)
      .value();
}

}  // namespace attnzoo
