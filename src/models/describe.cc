#include "models/describe.h"

#include <utility>

#include "loader/load_error.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

// Same names as kBuilders in registry.cc; a test checks that every registered architecture has an entry.
const std::pair<const char*, ModelDescriber> kDescribers[] = {
    {"LlamaForCausalLM", describe_llama_family},
    {"Mamba2ForCausalLM", describe_mamba2},
    {"MambaForCausalLM", describe_mamba}, {"FalconMambaForCausalLM", describe_mamba},
    {"Lfm2ForCausalLM", describe_lfm2},
    {"FalconH1ForCausalLM", describe_falcon_h1},
    {"DeepseekV3ForCausalLM", describe_deepseek_v3},
    {"Gemma2ForCausalLM", describe_gemma},
    {"Gemma3ForCausalLM", describe_gemma},
    {"Gemma3ForConditionalGeneration", describe_gemma},
    {"GptOssForCausalLM", describe_gpt_oss},
    {"KimiLinearForCausalLM", describe_kimi_linear},
    {"MistralForCausalLM", describe_llama_family},
    {"Qwen2ForCausalLM", describe_llama_family},
    {"Qwen3ForCausalLM", describe_llama_family},
    {"Qwen3NextForCausalLM", describe_qwen3_next},
    {"Qwen3_5ForCausalLM", describe_qwen3_next},
    {"Qwen3_5ForConditionalGeneration", describe_qwen3_next},
    {"Qwen3_5MoeForCausalLM", describe_qwen3_next},
    {"Qwen3_5MoeForConditionalGeneration", describe_qwen3_next},
    {"RWKV7ForCausalLM", describe_rwkv7},
    {"LlavaForConditionalGeneration", describe_wrapped_language_model},
    {"Mistral3ForConditionalGeneration", describe_wrapped_language_model},
};

}  // namespace

ModelDescriber find_model_describer(const std::string& architecture) {
  for (const auto& [name, describer] : kDescribers)
    if (architecture == name) return describer;
  return nullptr;
}

ModelDescription describe_model(const Config& root, const LoadOptions& options) {
  const std::vector<std::string> archs = root.get_string_list("architectures");
  if (archs.empty()) throw LoadError(root.source() + ": key 'architectures': empty list");
  const ModelDescriber describer = find_model_describer(archs[0]);
  if (!describer) {
    const bool builds = find_model_builder(archs[0]) != nullptr;
    throw LoadError(root.source() + ": architecture '" + archs[0] + "' " +
                    (builds ? "has no config-only description yet; inspect a full checkpoint with -m DIR"
                            : "is not supported"));
  }
  return describer(root, options);
}

std::vector<LayerInfo> all_attention_stack(const ModelDescription& d) {
  LayerInfo layer;
  if (d.mla) {
    // Uncompressed MLA: keys of dn + dr and values of dv per head. KvCache::spec sizes K and V alike, so the
    // per-token bytes are the mean of a cache with dk-wide and one with dv-wide heads (exact: bytes are linear).
    const MlaConfig& m = *d.mla;
    const CacheSpec k = KvCache::spec(m.num_heads, m.qk_head_dim(), m.cache_block_tokens);
    const CacheSpec v = KvCache::spec(m.num_heads, m.v_head_dim, m.cache_block_tokens);
    layer = {"attention", 0, k};
    layer.cache.bytes_per_token = (k.bytes_per_token + v.bytes_per_token) / 2;
  } else if (d.attention) {
    AttentionConfig full = *d.attention;
    full.window = 0;
    layer = {AttentionLayer::kind_of(full), 0, AttentionLayer::spec(full)};
  } else {
    return {};
  }
  return std::vector<LayerInfo>(size_t(d.info.num_layers), layer);
}

std::vector<LayerInfo> all_mla_stack(const ModelDescription& d) {
  if (!d.mla) return {};
  return std::vector<LayerInfo>(size_t(d.info.num_layers), LayerInfo{MlaMixer::kKind, 0, MlaMixer::spec(*d.mla)});
}

}  // namespace attnzoo
