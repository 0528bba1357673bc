#pragma once
// Architecture name (config.json "architectures"[0]) -> builder. Adding a model family = one builder file plus
// one line in registry.cc; the engine never sees model names.
#include <memory>
#include <string>
#include <vector>

#include "loader/model_dir.h"
#include "models/model.h"

namespace attnzoo {

using ModelBuilder = std::unique_ptr<Model> (*)(ModelFiles files, const LoadOptions& options);

// nullptr when the architecture is unknown.
ModelBuilder find_model_builder(const std::string& architecture);
std::vector<std::string> supported_architectures();

// Builders (one file each).
std::unique_ptr<Model> build_llama_family(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_qwen3_next(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_mamba2(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_mamba(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_lfm2(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_jamba(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_minimax(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_falcon_h1(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_nemotron_h(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_granite_hybrid(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_deepseek_v3(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_gemma(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_olmo2(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_glm4(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_glm4_moe(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_minimax_m2(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_cohere(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_phi3(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_gpt_oss(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_kimi_linear(ModelFiles files, const LoadOptions& options);
std::unique_ptr<Model> build_rwkv7(ModelFiles files, const LoadOptions& options);
// LLaVA / Mistral 3 wrappers: the builder of text_config.model_type (wrapped.cc).
std::unique_ptr<Model> build_wrapped_language_model(ModelFiles files, const LoadOptions& options);

}  // namespace attnzoo
