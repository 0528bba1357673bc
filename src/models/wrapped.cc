// Multimodal wrappers whose language model can be any of several families (LLaVA, Mistral 3): the builder and
// describer of text_config.model_type run on it. ModelFiles already exposes the wrapper's language-model tensors
// under the text model's names, and each builder reads its settings from text_config.
#include <string>
#include <utility>

#include "loader/load_error.h"
#include "models/describe.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

struct TextFamily {
  const char* model_type;
  ModelBuilder build;
  ModelDescriber describe;
};

// Families whose builders take their settings from text_config alone (not from the wrapper's architecture name).
const TextFamily kTextFamilies[] = {
    {"llama", build_llama_family, describe_llama_family},
    {"mistral", build_llama_family, describe_llama_family},
    {"ministral3", build_llama_family, describe_llama_family},
    {"qwen2", build_llama_family, describe_llama_family},
    {"qwen3", build_llama_family, describe_llama_family},
};

const TextFamily& text_family(const Config& root) {
  const std::string arch = root.get_string_list("architectures")[0];
  if (!root.has_text_config()) throw LoadError(root.source() + ": " + arch + " needs a text_config");
  const std::string type = root.text_config().get_string("model_type");
  std::string known;
  for (const TextFamily& f : kTextFamilies) {
    if (type == f.model_type) return f;
    known += (known.empty() ? "" : ", ") + std::string(f.model_type);
  }
  throw LoadError(root.source() + ": key 'text_config.model_type': " + arch + " with a '" + type +
                  "' language model is not supported (supported: " + known + ")");
}

}  // namespace

std::unique_ptr<Model> build_wrapped_language_model(ModelFiles files, const LoadOptions& options) {
  const ModelBuilder build = text_family(files.config()).build;
  return build(std::move(files), options);
}

ModelDescription describe_wrapped_language_model(const Config& root, const LoadOptions& options) {
  return text_family(root).describe(root, options);
}

}  // namespace attnzoo
