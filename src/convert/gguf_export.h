#pragma once
// attnzoo quantize: a Hugging Face checkpoint directory written as a GGUF v3 file the way llama.cpp's
// convert_hf_to_gguf.py (+ llama-quantize) writes it: GGUF tensor names (loader/gguf_checkpoint.h's table, the
// inverse of the one the loader reads with), `<arch>.*` hyperparameters, Llama's Q/K rows permuted for ggml's
// RoPE, Gemma's norms as 1 + w, Llama 3 RoPE scaling as rope_freqs.weight, tokenizer.ggml.* from tokenizer.json,
// and each matrix in the type TensorPolicy picks. Supported: LlamaForCausalLM (Llama, SmolLM2, Mistral-style),
// Qwen2ForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM, Olmo2ForCausalLM, Phi3ForCausalLM (LongRoPE factors as
// rope_factors_long / _short), SmolLM3ForCausalLM, MixtralForCausalLM (llama with stacked experts),
// CohereForCausalLM, Cohere2ForCausalLM, Glm4ForCausalLM, Glm4MoeForCausalLM (MTP layers appended as the
// converter does), GptOssForCausalLM (gguf_export_gpt_oss.h: experts split, stacked, MXFP4 ones kept),
// MiniMaxM2ForCausalLM, Ministral3ForCausalLM and Mistral3ForConditionalGeneration's text model (mistral3), the
// text models of Gemma3ForConditionalGeneration (gemma3) and LlavaForConditionalGeneration (llama, the converter's
// LlamaModel for a Llama, Mistral or Qwen2 text model),
// DeepseekV2ForCausalLM / DeepseekV3ForCausalLM (deepseek2: gguf_export_deepseek2.h), Qwen3NextForCausalLM with
// experts, Qwen3_5ForCausalLM
// and Qwen3_5MoeForCausalLM, and the text model of Qwen3_5ForConditionalGeneration /
// Qwen3_5MoeForConditionalGeneration (gguf_export_qwen3_hybrid.h), Lfm2ForCausalLM, Lfm2MoeForCausalLM and
// JambaForCausalLM (gguf_export_hybrids.h), NemotronHForCausalLM,
// GraniteMoeHybridForCausalLM and BambaForCausalLM (gguf_export_pattern_hybrids.h), RWKV7ForCausalLM
// (gguf_export_rwkv7.h) and KimiLinearForCausalLM (gguf_export_kimi_linear.h). MiniMaxForCausalLM is refused with
// the reason: llama.cpp has no architecture for its lightning attention.
#include <cstdint>
#include <string>
#include <vector>

#include "convert/tensor_policy.h"

namespace attnzoo {

struct QuantizeOptions {
  TensorPolicy policy;
  // Optional per-input-channel importance (imatrix), keyed by Hugging Face tensor name: one weight per column.
  // Tensors without an entry are quantized without it.
  std::vector<std::pair<std::string, std::vector<float>>> importance;
  // A GGUF source (gguf_requantize.h): block-quantized tensors may be dequantized and quantized again
  // (llama-quantize's --allow-requantize); without it they are refused by name unless their type stays.
  bool allow_requantize = false;
};

struct QuantizedTensor {
  std::string hf_name, gguf_name;
  std::vector<int64_t> shape;  // torch order
  QuantType source = QuantType::F32, type = QuantType::F32;
  uint64_t bytes = 0;
};

struct QuantizeSummary {
  std::string architecture;  // general.architecture
  std::vector<QuantizedTensor> tensors;
  bool tokenizer = false;    // tokenizer.ggml.* written (the directory has a tokenizer.json)
  uint64_t bytes_in = 0, bytes_out = 0;
  // Tensors of a multimodal wrapper outside its language model (vision tower, multi-token prediction), not written.
  size_t set_aside = 0;
  // A GGUF source: block-quantized tensors dequantized and quantized again (allow_requantize), which compounds
  // the two roundings; the caller warns.
  size_t requantized = 0;
};

// Reads `src_dir` (a safetensors checkpoint; quantized safetensors are refused), writes `out_path`. A GGUF file as
// `src_dir` is requantized instead (requantize_gguf, gguf_requantize.h).
// ArgumentError / LoadError naming the directory, file, key or tensor at fault; nothing is left at out_path then.
QuantizeSummary quantize_checkpoint(const std::string& src_dir, const std::string& out_path, const QuantizeOptions& o);

// ArgumentError naming -o when writing out_path would destroy the source: the GGUF file itself, a file of the
// checkpoint directory, or a directory. quantize_checkpoint checks it first; a caller that calibrates (a forward
// pass over the whole text) checks it before that.
void refuse_output_over_source(const std::string& src, const std::string& out_path);

}  // namespace attnzoo
