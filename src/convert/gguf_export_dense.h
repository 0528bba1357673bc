#pragma once
// Attention families `attnzoo quantize` writes the way convert_hf_to_gguf.py does beyond add_hparams' common keys:
// MistralForCausalLM as llama (the converter's LlamaModel: no key for a sliding window), Qwen3MoeForCausalLM as
// qwen3moe (expert counts and sizes; llama.cpp's graph routes every layer and renormalizes the top k),
// Gemma2ForCausalLM / Gemma3ForCausalLM as gemma2 / gemma3 (softcaps, window; llama.cpp fixes the layer pattern,
// the query scale and Gemma 3's local RoPE base). What GGUF cannot hold is refused with a LoadError naming its key.
#include <cstdint>
#include <string>

#include "layers/rope.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"

namespace attnzoo {

// The RoPE written as <arch>.rope.*: Gemma 3's full-attention layers' one (its sliding layers' is fixed), else
// read_rope's.
RopeConfig export_rope(const Config& c, const std::string& arch, int64_t head_dim);

// The class a wrapper's language model is written as, the converter's way: Gemma3ForConditionalGeneration's as
// Gemma3ForCausalLM (Gemma3Model), LlavaForConditionalGeneration's as LlamaForCausalLM (LlamaModel, whatever its
// text model: a Qwen2's biases and half-split RoPE hold in llama's permuted rows) or MistralForCausalLM; `hf_class`
// itself for the others. LoadError naming text_config.model_type for a LLaVA text model llama cannot hold.
std::string wrapper_text_class(const Config& root, const std::string& hf_class);

// The keys `hf_class` (written as `arch`) needs beyond add_hparams'; checks the config fits them. Nothing for
// other classes.
void add_dense_family_hparams(GgufWriter& w, const Config& c, const std::string& hf_class, const std::string& arch);

}  // namespace attnzoo
