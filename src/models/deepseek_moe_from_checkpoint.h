#pragma once
// DeepSeek's routed-expert feed-forward (layers/deepseek_moe.h) read from a checkpoint, shared by the DeepSeek-V3
// and Kimi Linear builders and their describers. The two differ only in the experts' tensor names and in the
// config keys (each builder reads its own), so those are the parameters.
#include <memory>
#include <string>

#include "layers/activations.h"
#include "layers/deepseek_moe.h"
#include "layers/mlp.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/weight_bytes.h"

namespace attnzoo {

// Suffixes of a gated MLP's three projections under its prefix.
struct GatedMlpNames {
  std::string gate, up, down;
};
// transformers' names (DeepSeek's experts, both models' dense MLPs and shared experts).
inline const GatedMlpNames kGatedMlpProjNames{".gate_proj", ".up_proj", ".down_proj"};

// A GatedMlp [inter, hidden] named `prefix`, Linears held as `store`; converted bytes are added to *owned.
GatedMlp load_gated_mlp(const ModelFiles& files, const std::string& prefix, const GatedMlpNames& names,
                        int64_t inter, int64_t hidden, Activation act, DType store, WeightBytes* owned);

struct DeepseekMoeShape {
  DeepseekMoeConfig config;
  int64_t num_experts = 0;
  int64_t n_shared = 0;  // the shared experts are one gated MLP n_shared times as wide
};

// DeepSeek-V3's MoE keys as transformers reads them (GLM-4.5 writes the same ones): n_routed_experts,
// num_experts_per_tok, n_group, topk_group, norm_topk_prob, routed_scaling_factor, n_shared_experts.
DeepseekMoeShape read_deepseek_moe_shape(const Config& c);

// `prefix`.experts.<e> (projections named `expert_names`), `prefix`.shared_experts when n_shared > 0, and the
// router `prefix`.gate with its optional correction bias `prefix` + `bias_suffix` (MiniMax-M2 keeps it beside
// the router, not in it). `inter`: moe_intermediate_size.
std::unique_ptr<DeepseekMoe> load_deepseek_moe(const ModelFiles& files, const DeepseekMoeShape& shape,
                                               const std::string& prefix, const GatedMlpNames& expert_names,
                                               int64_t inter, int64_t hidden, Activation act, DType store,
                                               WeightBytes* owned,
                                               const std::string& bias_suffix = ".gate.e_score_correction_bias");

// Parameters of one layer's feed-forward as transformers writes it: with `sparse`, those tensors (router and
// correction bias included) at moe_intermediate_size (`expert_inter_key`); else a dense gated MLP of
// intermediate_size.
int64_t deepseek_ffn_parameter_count(const Config& c, const DeepseekMoeShape& shape, bool sparse, int64_t hidden,
                                     const char* expert_inter_key = "moe_intermediate_size");

}  // namespace attnzoo
