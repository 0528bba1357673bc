#include "models/registry.h"

#include <utility>

namespace attnzoo {
namespace {

const std::pair<const char*, ModelBuilder> kBuilders[] = {
    {"LlamaForCausalLM", build_llama_family},
    {"MistralForCausalLM", build_llama_family},
    {"Qwen2ForCausalLM", build_llama_family},
    {"Qwen3ForCausalLM", build_llama_family},
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
