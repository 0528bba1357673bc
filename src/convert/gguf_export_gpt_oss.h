#pragma once
// GptOssForCausalLM written the way llama.cpp's convert_hf_to_gguf.py (GptOssModel) writes it, the inverse of
// loader/gguf_gpt_oss.h: self_attn.sinks as attn_sinks.weight, the router as ffn_gate_inp, each layer's fused
// experts split into ffn_gate_exps (gate_up's even features) and ffn_up_exps (odd ones), transposed to
// [n_expert, out, in] and stacked, with their biases ffn_*_exps.bias [n_expert, out] (F32). Dense experts take the
// type the policy picks; MXFP4 experts (_blocks / _scales) are kept as MXFP4, their nibbles repacked into GGUF's
// blocks as the converter does (no value changes). GGUF holds only llama.cpp's fixed layout (every other layer
// sliding from the first, SwiGLU alpha 1.702 and limit 7, YaRN read back without truncation): another config is
// refused, naming its key.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convert/gguf_export.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// gpt-oss.* keys beyond the attention ones every architecture writes; LoadError naming a key GGUF cannot hold.
void add_gpt_oss_hparams(GgufWriter& w, const Config& c);

// Whether `hf_name` is one of the expert tensors add_gpt_oss_experts writes (the attention planner skips them).
bool is_gpt_oss_expert_tensor(const std::string& hf_name);

// model.layers.N.self_attn.sinks -> blk.N.attn_sinks.weight (nullopt for a name not of that form).
std::optional<std::string> gpt_oss_sinks_name(const std::string& hf_name);

// The experts of every layer; returns what was written, and adds the source bytes read to *bytes_in.
std::vector<QuantizedTensor> add_gpt_oss_experts(GgufWriter& w, const std::shared_ptr<ModelFiles>& files,
                                                 const Config& c, const QuantizeOptions& o, uint64_t* bytes_in);

}  // namespace attnzoo
