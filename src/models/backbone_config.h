#pragma once
// config.json readers shared by the attention-free backbones (MambaForCausalLM / FalconMamba, Mamba2ForCausalLM,
// RWKV7ForCausalLM), whose configs have no attention keys for read_model_info to read.
#include <string>

#include "loader/config.h"
#include "models/model.h"

namespace attnzoo {

// architectures[0], model_type, hidden_size, num_hidden_layers, vocab_size (missing keys -> LoadError naming
// them), the checkpoint's dtype and the weight format; each builder checks the sizes with its own.
ModelInfo read_backbone_info(const Config& c, const LoadOptions& options, const std::string& default_model_type);

// hidden_act must be silu (or its alias swish), which `kernel` (e.g. "the Mamba-2 conv") hard-wires; LoadError
// naming the key otherwise.
void require_silu_act(const Config& c, const std::string& kernel);

}  // namespace attnzoo
