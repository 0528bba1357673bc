#pragma once
// Qwen3NextForCausalLM (qwen3next), Qwen3_5ForCausalLM (qwen35) and Qwen3_5MoeForCausalLM (qwen35moe) written the
// way llama.cpp's convert_hf_to_gguf.py (Qwen3NextModel on Qwen2MoeModel; Qwen3_5TextModel / Qwen3_5MoeTextModel
// on it) writes them, the inverse of what loader/gguf_hybrids.h and loader/gguf_qwen35.h undo:
//   all        zero-centered RMSNorm weights stored as 1 + w (all but the linear attention's gated norm), A_log as
//              A = -exp(A_log), the conv1d kernel squeezed to [channels, kernel], dt_bias as ssm_dt.bias, each
//              layer's experts stacked into ffn_{gate,up,down}_exps, the conv kernel, A and the routers in F32
//   qwen3next  in_proj_qkvz ([q, k, v, z] per key head) split into attn_qkv ([all q; all k; all v]) and attn_gate
//              ([all z]). Only the MoE form: llama.cpp refuses a qwen3next file without experts (and attnzoo's
//              reader asks for qwen3next.expert_count too); layers in mlp_only_layers keep dense MLPs
//   qwen35*    the linear-attention value heads moved from grouped by key head (Hugging Face head k * r + j, r value
//              heads per key head) to tiled over the key heads (stored head j * nk + k): in_proj_qkv's v rows,
//              conv1d's v channels, in_proj_z, in_proj_b / in_proj_a, A_log, dt_bias and out_proj's input columns
//              (moved in f32, before quantizing); Qwen3.5-MoE's fused experts.gate_up_proj split into
//              ffn_gate_exps / ffn_up_exps; rope.dimension_sections written (text: one section holds them all).
//              The checkpoint's multi-token-prediction tensors (mtp.*) are left out, as transformers leaves them.
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_qwen35.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// The hybrid a Hugging Face class is, if any: the text classes, and Qwen3_5ForConditionalGeneration /
// Qwen3_5MoeForConditionalGeneration, whose text model is written as the text class's (settings from text_config,
// model.language_model.* as model.*), as the converter does; their vision tower belongs in a separate mmproj file.
std::optional<Qwen3Hybrid> qwen3_hybrid_for_hf(const std::string& hf_class);

// general.architecture: "qwen3next", "qwen35" or "qwen35moe".
const char* qwen3_hybrid_arch(Qwen3Hybrid v);

// <arch>.* hyperparameters beyond the attention ones every architecture writes. LoadError naming the config key
// that GGUF cannot express (num_experts 0 for a MoE architecture, layer_types not one full-attention layer every
// full_attention_interval, norm_topk_prob false).
void add_qwen3_hybrid_hparams(GgufWriter& w, const Config& c, int64_t rotary_dim, Qwen3Hybrid v);

// The file's tensors (settings from the config's text_config where it has one). LoadError naming the tensor whose shape contradicts the config, or an expert missing.
std::vector<TensorPlan> plan_qwen3_hybrid(const ModelFiles& files, Qwen3Hybrid v);

}  // namespace attnzoo
