#pragma once
// One tensor of the GGUF file `attnzoo quantize` writes, described before any byte is read: which Hugging Face
// tensors it is made of and the converter's edits (convert_hf_to_gguf.py) that turn them into it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/quant_type.h"
#include "loader/model_dir.h"
#include "loader/value_head_tiling.h"

namespace attnzoo {

// A value edit applied in f32 before quantizing.
enum class ValueEdit : uint8_t {
  none,
  plus_one,  // Gemma's and Qwen3-Next's zero-centered RMSNorm weights stored as 1 + w
  neg_exp,   // A_log stored as A = -exp(A_log)
};

struct TensorPlan {
  std::string gguf_name;
  // Its Hugging Face sources, each one a [rows, cols] matrix (or a vector), stacked in this order (the experts of
  // a MoE layer: ffn_*_exps); usually one.
  std::vector<std::string> sources;
  std::vector<int64_t> shape;  // torch order, as written (a stack's leading dimension included)
  // The source rows kept, in this order (Qwen3-Next's in_proj_qkvz split into attn_qkv / attn_gate); empty: all.
  std::vector<int64_t> rows;
  int64_t permute_heads = 0;  // Llama's Q / K rows interleaved per head for ggml's RoPE (permute_rope_rows)
  ValueEdit edit = ValueEdit::none;
  ValueHeadTiling value_heads;  // Qwen3.5: tiled in f32 before quantizing (key_heads 0: none)
  std::optional<QuantType> type;  // forced whatever the policy says (the converter's always-F32 tensors)
  // Factors multiplied in, in this order, each into the values [begin, end) of every source (flat, row-major) in
  // f32 as the converter's torch does (Falcon-H1's muP multipliers folded into the weights)
  struct Scale {
    int64_t begin, end;
    double factor;
  };
  std::vector<Scale> scales;
  // deepseek2's attn_k_b: the kept rows make transpose_heads blocks of [n, cols], each written transposed as
  // [cols, n] (in f32, before quantizing); `shape` is the written one
  int64_t transpose_heads = 0;
};

// Where a MoE's experts sit in a Hugging Face checkpoint, one tensor per expert and projection:
// <layer_prefix><i>.<block>.experts.<e>.<suffix>.weight, each projection stacked by llama.cpp into
// blk.<i>.<gguf base>.weight [experts, rows, cols].
struct ExpertTensors {
  std::string block;  // "mlp", "block_sparse_moe", "feed_forward", "mixer"
  std::vector<std::pair<std::string, std::string>> projections;  // Hugging Face suffix, GGUF base: w1, ffn_gate_exps
  std::string layer_prefix = "model.layers.";
};

// The layer of `name` when it is one expert's projection under `t` (layer and expert indices numbers), else nullopt.
std::optional<int64_t> expert_tensor_layer(const std::string& name, const ExpertTensors& t);

// A MoE's experts as llama.cpp stacks them: for each layer in `layers`, one [experts, rows, cols] tensor per
// projection of `t`. LoadError naming a missing expert, or when `found` (the expert tensors the checkpoint holds)
// counts other than layers x experts x projections.
std::vector<TensorPlan> plan_stacked_experts(const ModelFiles& files, const std::vector<int64_t>& layers,
                                             int64_t experts, const ExpertTensors& t, size_t found);
// The same over the layers that `names`, every expert tensor of the checkpoint (any order), belong to; LoadError
// naming one without a numeric layer index.
std::vector<TensorPlan> plan_stacked_experts(const ModelFiles& files, const std::vector<std::string>& names,
                                             int64_t experts, const ExpertTensors& t);

}  // namespace attnzoo
