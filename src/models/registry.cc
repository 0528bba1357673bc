#include "models/registry.h"

#include <utility>

namespace attnzoo {
namespace {

const std::pair<const char*, ModelBuilder> kBuilders[] = {
    {"LlamaForCausalLM", build_llama_family},
    {"Mamba2ForCausalLM", build_mamba2},
    {"MambaForCausalLM", build_mamba}, {"FalconMambaForCausalLM", build_mamba},
    {"Lfm2ForCausalLM", build_lfm2},
    {"Lfm2MoeForCausalLM", build_lfm2},
    {"FalconH1ForCausalLM", build_falcon_h1},
    {"CohereForCausalLM", build_cohere}, {"Cohere2ForCausalLM", build_cohere},
    {"DeepseekV3ForCausalLM", build_deepseek_v3},
    {"DeepseekV2ForCausalLM", build_deepseek_v3},
    {"GemmaForCausalLM", build_gemma},
    {"Gemma2ForCausalLM", build_gemma},
    {"Gemma3ForCausalLM", build_gemma},
    {"Gemma3ForConditionalGeneration", build_gemma},  // multimodal wrappers: their language model (model_dir.h)
    {"Glm4ForCausalLM", build_glm4},
    {"Glm4MoeForCausalLM", build_glm4_moe},
    {"GptOssForCausalLM", build_gpt_oss},
    {"JambaForCausalLM", build_jamba},
    {"GraniteMoeHybridForCausalLM", build_granite_hybrid},
    {"BambaForCausalLM", build_granite_hybrid},
    {"KimiLinearForCausalLM", build_kimi_linear},
    {"LlavaForConditionalGeneration", build_wrapped_language_model},
    {"MiniMaxM2ForCausalLM", build_minimax_m2},
    {"Mistral3ForConditionalGeneration", build_wrapped_language_model},
    {"Ministral3ForCausalLM", build_llama_family},
    {"MiniMaxForCausalLM", build_minimax},
    {"MistralForCausalLM", build_llama_family},
    {"MixtralForCausalLM", build_llama_family},
    {"NemotronHForCausalLM", build_nemotron_h},
    {"Olmo2ForCausalLM", build_olmo2},
    {"Phi3ForCausalLM", build_phi3},
    {"Qwen2ForCausalLM", build_llama_family},
    {"Qwen3ForCausalLM", build_llama_family},
    {"Qwen3MoeForCausalLM", build_llama_family},
    {"Qwen3NextForCausalLM", build_qwen3_next},
    {"Qwen3_5ForCausalLM", build_qwen3_next},
    {"Qwen3_5ForConditionalGeneration", build_qwen3_next},
    {"Qwen3_5MoeForCausalLM", build_qwen3_next},
    {"Qwen3_5MoeForConditionalGeneration", build_qwen3_next},
    {"RWKV7ForCausalLM", build_rwkv7},
    {"SmolLM3ForCausalLM", build_llama_family},
};

}  // namespace

ModelBuilder find_model_builder(const std::string& architecture) {
  for (const auto& [name, builder] : kBuilders)
    if (architecture == name) return builder;
  return nullptr;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> out;
  for (const auto& entry : kBuilders) out.push_back(entry.first);
  return out;
}

}  // namespace attnzoo
