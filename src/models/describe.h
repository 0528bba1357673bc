#pragma once
// A model described from its config.json alone, without weights: the layers (kind, window, CacheSpec) its
// builder would make, so `attnzoo inspect --config` can size the caches of checkpoints that are not on disk.
// Each architecture's describer lives beside its builder (same file) and reads the config through the same
// helpers; the CacheSpecs come from the mixers' static spec() functions, the very ones the built mixers return
// from cache_spec() (no second copy of the cache formulas). Tests compare both paths on real checkpoints.
#include <optional>
#include <string>
#include <vector>

#include "core/checked.h"
#include "layers/attention_layer.h"
#include "layers/mla_mixer.h"
#include "loader/config.h"
#include "models/model.h"

namespace attnzoo {

struct ModelDescription {
  // Shape fields and layers as the built model's info() would report them. parameter_count is set only when
  // parameters_estimated (checkpoint_bytes / owned bytes stay 0: there is no checkpoint).
  ModelInfo info;
  // parameter_count was computed from the config: the tensors the builder loads, under the checkpoint layout
  // transformers writes. A real checkpoint can differ (extra MTP layers, quantization scales ...).
  bool parameters_estimated = false;
  // The model's softmax attention heads (attention-free models: none), for the all-attention comparison.
  std::optional<AttentionConfig> attention;
  // MLA models: the latent attention shape, for the all-MLA and uncompressed comparisons.
  std::optional<MlaConfig> mla;
};

// `root` is the whole config.json (holding "architectures"); describers read the text config themselves.
using ModelDescriber = ModelDescription (*)(const Config& root, const LoadOptions& options);

// nullptr when the architecture has no describer.
ModelDescriber find_model_describer(const std::string& architecture);
// Picks the describer by "architectures"[0]; LoadError for an unknown architecture or a bad config.
ModelDescription describe_model(const Config& root, const LoadOptions& options = {});

// The same stack with every layer softmax attention over the whole context with the model's heads: its own
// attention config, or for MLA models the MLA heads uncompressed (K [H, dn + dr] and V [H, dv] per token, as
// the un-absorbed attention caches them). Empty when the model has neither.
std::vector<LayerInfo> all_attention_stack(const ModelDescription& d);
// The same stack with every layer MLA (MLA models only; empty otherwise).
std::vector<LayerInfo> all_mla_stack(const ModelDescription& d);

// Parameters of a Linear [out, in] with or without bias (the estimates' building block). Checked: config values
// are untrusted, and a sum of these must fail by name rather than wrap (see core/checked.h).
inline Checked linear_params(int64_t out, int64_t in, bool bias = false) {
  return Checked(out) * in + (bias ? out : 0);
}

// Describers (one per builder file).
ModelDescription describe_llama_family(const Config& root, const LoadOptions& options);
ModelDescription describe_qwen3_next(const Config& root, const LoadOptions& options);
ModelDescription describe_mamba2(const Config& root, const LoadOptions& options);
ModelDescription describe_mamba(const Config& root, const LoadOptions& options);
ModelDescription describe_lfm2(const Config& root, const LoadOptions& options);
ModelDescription describe_jamba(const Config& root, const LoadOptions& options);
ModelDescription describe_minimax(const Config& root, const LoadOptions& options);
ModelDescription describe_falcon_h1(const Config& root, const LoadOptions& options);
ModelDescription describe_nemotron_h(const Config& root, const LoadOptions& options);
ModelDescription describe_granite_hybrid(const Config& root, const LoadOptions& options);
ModelDescription describe_deepseek_v3(const Config& root, const LoadOptions& options);
ModelDescription describe_gemma(const Config& root, const LoadOptions& options);
ModelDescription describe_olmo2(const Config& root, const LoadOptions& options);
ModelDescription describe_glm4(const Config& root, const LoadOptions& options);
ModelDescription describe_glm4_moe(const Config& root, const LoadOptions& options);
ModelDescription describe_minimax_m2(const Config& root, const LoadOptions& options);
ModelDescription describe_cohere(const Config& root, const LoadOptions& options);
ModelDescription describe_phi3(const Config& root, const LoadOptions& options);
ModelDescription describe_gpt_oss(const Config& root, const LoadOptions& options);
ModelDescription describe_kimi_linear(const Config& root, const LoadOptions& options);
ModelDescription describe_rwkv7(const Config& root, const LoadOptions& options);
ModelDescription describe_wrapped_language_model(const Config& root, const LoadOptions& options);

}  // namespace attnzoo
