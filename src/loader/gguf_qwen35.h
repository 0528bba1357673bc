#pragma once
// The Qwen3-Next / Qwen3.5 side of gguf_hybrids.cc: config.json from the metadata of llama.cpp's qwen3next,
// qwen35 and qwen35moe files, and the converter's linear-attention edits that are more than a rename:
//   qwen3next  in_proj_qkvz (interleaved per key head) split into attn_qkv and attn_gate: kept apart as
//              in_proj_qkv and in_proj_z, each in its own type (llama-quantize's Q4_K_M etc. raise attn_qkv
//              only); the layer runs them as two projections beside in_proj_ba
//   qwen35*    the value heads tiled over the key heads in attn_qkv's v rows, attn_gate (in_proj_z), ssm_beta,
//              ssm_alpha, ssm_a, ssm_dt.bias, ssm_conv1d's v channels and ssm_out's input columns: untiled
//              (value_head_tiling.h); the multi-token-prediction blocks the converter appends (nextn_predict_layers)
//              are left out, as transformers leaves out the checkpoint's mtp.* tensors
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_hf_util.h"

namespace attnzoo {

enum class Qwen3Hybrid { next, dense35, moe35 };

// The architectures, model_type and the rest of config.json (keys missing, mistyped or inconsistent: LoadError
// naming the key).
void qwen3_hybrid_config(gguf_hf::JsonObject& c, const gguf_hf::Meta& m, Qwen3Hybrid v);

// The decoder blocks of a Qwen3.5 file: block_count less nextn_predict_layers.
int64_t qwen35_text_layers(const gguf_hf::Meta& m);

// Qwen3-Next: attn_qkv and its attn_gate as stored, named `layer`linear_attn.in_proj_qkv and in_proj_z. Shapes
// that do not fit the metadata: LoadError naming attn_qkv.
std::vector<GgufHfTensor> qwen3next_in_proj(const GgufFile& f, const GgufTensor& qkv, const std::string& layer);

// Qwen3.5: sets h's value-head untiling when `base` (the block tensor's name without its extension) is one the
// converter tiled, after checking its shape against the head counts (LoadError naming the tensor).
void mark_value_heads(const GgufFile& f, const GgufTensor& t, const std::string& base, GgufHfTensor& h);

// undo_gguf_fix's last step for t.value_heads: `out` (t's bytes, value fix done) permuted in place.
void untile_value_heads(const GgufHfTensor& t, GgufHfBytes& out, const std::string& file);

}  // namespace attnzoo
