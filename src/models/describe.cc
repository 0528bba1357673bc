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
    {"Lfm2MoeForCausalLM", describe_lfm2},
    {"JambaForCausalLM", describe_jamba},
    {"MiniMaxForCausalLM", describe_minimax},
    {"FalconH1ForCausalLM", describe_falcon_h1},
    {"CohereForCausalLM", describe_cohere}, {"Cohere2ForCausalLM", describe_cohere},
    {"DeepseekV3ForCausalLM", describe_deepseek_v3},
    {"DeepseekV2ForCausalLM", describe_deepseek_v3},
    {"GemmaForCausalLM", describe_gemma},
    {"Gemma2ForCausalLM", describe_gemma},
    {"Gemma3ForCausalLM", describe_gemma},
    {"Gemma3ForConditionalGeneration", describe_gemma},
    {"Glm4ForCausalLM", describe_glm4},
    {"Glm4MoeForCausalLM", describe_glm4_moe},
    {"GptOssForCausalLM", describe_gpt_oss},
    {"GraniteMoeHybridForCausalLM", describe_granite_hybrid},
    {"BambaForCausalLM", describe_granite_hybrid},
    {"KimiLinearForCausalLM", describe_kimi_linear},
    {"MiniMaxM2ForCausalLM", describe_minimax_m2},
    {"Ministral3ForCausalLM", describe_llama_family},
    {"MistralForCausalLM", describe_llama_family},
    {"MixtralForCausalLM", describe_llama_family},
    {"NemotronHForCausalLM", describe_nemotron_h},
    {"Olmo2ForCausalLM", describe_olmo2},
    {"Phi3ForCausalLM", describe_phi3},
    {"Qwen2ForCausalLM", describe_llama_family},
    {"Qwen3ForCausalLM", describe_llama_family},
    {"Qwen3MoeForCausalLM", describe_llama_family},
    {"Qwen3NextForCausalLM", describe_qwen3_next},
    {"Qwen3_5ForCausalLM", describe_qwen3_next},
    {"Qwen3_5ForConditionalGeneration", describe_qwen3_next},
    {"Qwen3_5MoeForCausalLM", describe_qwen3_next},
    {"Qwen3_5MoeForConditionalGeneration", describe_qwen3_next},
    {"RWKV7ForCausalLM", describe_rwkv7},
    {"SmolLM3ForCausalLM", describe_llama_family},
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
  ModelDescription d = describer(root, options);
  for (LayerInfo& l : d.info.layers) l.cache.dtype = options.pool.kv_dtype;  // as the pool would hold it
  return d;
}

std::vector<LayerInfo> all_attention_stack(const ModelDescription& d) {
  LayerInfo layer;
  if (d.mla) {
    // Uncompressed MLA: keys of dn + dr and values of dv per head, counted as one tensor of K and V side by side.
    const MlaConfig& m = *d.mla;
    CacheSpec kv = CacheSpec::kv(m.num_heads, m.qk_head_dim());
    kv.paged_tensors = 1;
    kv.head_dim = checked_add(m.qk_head_dim(), m.v_head_dim, "head_dim");
    kv.dtype = d.info.layers.empty() ? DType::f32 : d.info.layers[0].cache.dtype;
    layer = {"attention", 0, kv};
  } else if (d.attention) {
    AttentionConfig full = *d.attention;
    full.window = 0;
    layer = {AttentionLayer::kind_of(full), 0, AttentionLayer::spec(full)};
    layer.cache.dtype = d.info.layers.empty() ? DType::f32 : d.info.layers[0].cache.dtype;
  } else {
    return {};
  }
  return std::vector<LayerInfo>(size_t(d.info.num_layers), layer);
}

std::vector<LayerInfo> all_mla_stack(const ModelDescription& d) {
  if (!d.mla) return {};
  LayerInfo layer{MlaMixer::kKind, 0, MlaMixer::spec(*d.mla)};
  layer.cache.dtype = d.info.layers.empty() ? DType::f32 : d.info.layers[0].cache.dtype;
  return std::vector<LayerInfo>(size_t(d.info.num_layers), layer);
}

}  // namespace attnzoo
