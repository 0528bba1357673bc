#pragma once
// attnzoo quantize with a GGUF file as its source, as llama-quantize runs (GGUF in, GGUF out): every metadata key
// copied in order and byte for byte (tokenizer, chat template) but general.file_type (the new main type) and
// general.quantization_version (present when a tensor is block-quantized), split.* and general.alignment dropped;
// tensors in the same order, names and shapes at llama.cpp's 32-byte alignment whatever the source's, each one's type chosen by TensorPolicy from its GGUF
// name as the Hugging Face path chooses it, except the small 2-D tensors llama-quantize never quantizes (routers,
// conv kernels, SSM A / D, RWKV-7's LoRAs and mixes), which keep their stored type as there, and gpt-oss's MXFP4
// experts, kept as the Hugging Face path keeps an MXFP4 checkpoint's (llama-quantize would requantize them).
// F32 / F16 / BF16 are read directly; a tensor already block-quantized is copied when its type stays, else refused by
// name unless QuantizeOptions::allow_requantize (then dequantized, and quantized again).
#include <string>

#include "convert/gguf_export.h"

namespace attnzoo {

// Reads the GGUF file `src_path` (mapped: one tensor is converted at a time while the output is written) and
// writes `out_path`. Importance (QuantizeOptions::importance, keyed by Hugging Face names as --calibration yields
// them from a model loaded from this file) reaches each GGUF tensor through the loader's name tables, per expert
// slice of a stacked tensor. LoadError / ArgumentError naming the file and the tensor or flag at fault; nothing
// is left at out_path then.
QuantizeSummary requantize_gguf(const std::string& src_path, const std::string& out_path, const QuantizeOptions& o);

// Whether llama-quantize leaves GGUF tensor `gguf_name` in its stored type whatever the requested one (llama-quant's
// exclusions: names not ending in "weight" such as gpt-oss's stacked expert biases, routers, Mamba / LFM2 / Kimi
// conv kernels, SSM A, D and grouped norm, RWKV-7's LoRAs, lerp and first-token factors), the tensors the Hugging
// Face path writes in F32 by plan.
bool kept_as_stored(const std::string& gguf_name);

}  // namespace attnzoo
