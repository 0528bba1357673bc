#include "models/backbone_config.h"

#include "loader/load_error.h"

namespace attnzoo {

ModelInfo read_backbone_info(const Config& c, const LoadOptions& options, const std::string& default_model_type) {
  ModelInfo info;
  info.architecture = c.get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", default_model_type);
  info.hidden_size = c.get_int("hidden_size");
  info.num_layers = c.get_int("num_hidden_layers");
  info.vocab_size = c.get_int("vocab_size");
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  return info;
}

void require_silu_act(const Config& c, const std::string& kernel) {
  const std::string act = c.get_string_or("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    throw LoadError(c.source() + ": hidden_act '" + act + "' is not supported by " + kernel + " (only silu)");
}

}  // namespace attnzoo
