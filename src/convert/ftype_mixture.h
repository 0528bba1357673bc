#pragma once
// llama-quantize's mixture file types (Q2_K (here Q2_K_M), Q2_K_S, Q3_K_S / M / L, Q4_K_S / M, Q5_K_S / M, and
// IQ4_NL / IQ4_XS with their bumps): one main type, with some tensors raised by rules that read the tensor's kind,
// its layer and the model's shape (llama.cpp's llama_tensor_get_type). Those rules count tensors: attn_v's bump
// depends on its rank among every attn_v-like tensor in llama.cpp's order (by layer, then by name), so the types of
// a whole file are settled in one pass over its tensor list (resolve_mixture) before any is written, and
// choose_tensor_type reads the result.
//
// The rules per file type (n: block_count; "more bits": layer i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2; "GQA 4":
// 4+ query heads per KV head in layer 0):
//             attn_v / attn_qkv / attn_kv_b      ffn_down                          attn_output   (8 experts)
//   Q2_K_M    Q4_K with GQA 4, else Q3_K         Q3_K                              Q3_K          Q5_K
//   Q2_K_S    Q4_K with GQA 4                    Q4_K in the first n/8             -             -
//   Q3_K_S    -                                  -                                 -             Q5_K
//   Q3_K_M    Q5_K for the first 2, else Q4_K    Q5_K below n/16, else Q4_K        Q4_K          Q5_K
//   Q3_K_L    Q5_K                               Q5_K                              Q5_K          -
//   Q4_K_S    Q5_K for the first 4               Q5_K in the first n/8 (not falcon) -            Q5_K
//   Q4_K_M    Q6_K with more bits                Q6_K with more bits               -             Q5_K
//   Q5_K_S    -                                  -                                 -             -
//   Q5_K_M    Q6_K with more bits                Q6_K with more bits               -             -
//   IQ4_NL/XS Q5_K with GQA 4                    Q5_K in the first n/8 without imatrix  -        Q5_K
// (falcon: Q4_K_M's ffn_down Q6_K below n/16, Q5_K with more bits; Q3_K_M's Q5_K below n/16, Q4_K with more bits,
// else Q3_K; Q3_K_L's ffn_down and attn_output Q4_K; no other attn_output raise). For all of them: output.weight
// (and token_embd when the head is tied to it) Q6_K (Q8_0 for falcon or rows not whole blocks of the main type);
// an untied token_embd keeps the main type; an 8-expert model's attn_v and attn_k Q8_0; a Llama-70B shape (80
// layers, GQA) raises a Q3_K / Q4_K attn_v to Q5_K. Rows that are not whole blocks then fall back as for a single
// type (tensor_policy.h). Overrides (--tensor-type, --keep, --output-tensor-type, --token-embedding-type) decide
// their tensors first, which then do not count; --pure: every matrix the main type. Q2_K_S is refused without an
// importance matrix when a matrix other than the head and embeddings would be Q2_K, as llama-quantize refuses it.
// llama-quantize's "Q2_K" is called Q2_K_M here; its Q3_K, Q4_K and Q5_K name the _M mixtures, as here.
// The single types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q6_K read the same rules with nothing raised but: output.weight
// (and a tied token_embd) Q6_K (Q8_0 for Q8_0, falcon, or rows not whole blocks), an untied token_embd in the main
// type, an 8-expert model's attn_k / attn_v Q8_0, and with an imatrix Q4_0 / Q5_0's ffn_down in Q4_1 / Q5_1 below
// n/8 (llama.cpp: guards the first layers against "craziness" when an imatrix is given).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convert/tensor_policy.h"

namespace attnzoo {

// When a tensor kind is raised.
enum class Bump : uint8_t {
  never,
  always,
  more_bits,                 // llama.cpp's use_more_bits(i, n)
  first_two,                 // the first 2 attn_v-like tensors
  first_four,                // the first 4 attn_v-like tensors
  first_sixteenth,           // layers below n/16
  first_eighth,              // layers below n/8
  first_eighth_not_falcon,   // layers below n/8, but not in a falcon model
  first_eighth_no_importance,  // layers below n/8, quantized without an imatrix
  first_eighth_importance,     // layers below n/8, quantized with an imatrix
  gqa_four,                  // 4+ query heads per KV head (layer 0's counts)
};

struct FileMixture {
  std::string_view name;  // llama-quantize's name for it
  uint32_t file_type;     // general.file_type (LLAMA_FTYPE_MOSTLY_*)
  QuantType main;
  Bump attn_v;
  QuantType attn_v_type, attn_v_else;      // raised, and otherwise
  Bump ffn_down;
  QuantType ffn_down_type, ffn_down_else;  // raised, and otherwise
  QuantType attn_output;                   // attn_output's type in a model without 8 experts (not falcon)
  bool moe8_attn_output;                   // an 8-expert model's attn_output in Q5_K (else the main type)
  bool needs_importance;                   // refused without an imatrix (llama-quantize's Q2_K_S)
};

// The mixture named `name` (case-insensitive; llama-quantize's Q2_K, Q3_K, Q4_K and Q5_K name its Q2_K, Q3_K_M,
// Q4_K_M and Q5_K_M mixtures), nullptr for a plain type name.
const FileMixture* find_file_mixture(const std::string& name);

// --type: a type name (parse_quant_type's) or a mixture's; sets p.type and p.mixture (IQ4_NL / IQ4_XS are both:
// their mixture). ArgumentError naming `what` and listing every choice otherwise.
void set_file_type(TensorPolicy& p, const std::string& name, const std::string& what);

// What the rules read of the model, as llama.cpp reads it from the GGUF metadata.
struct MixtureModel {
  std::string arch;                  // general.architecture
  int64_t layers = 0;                // <arch>.block_count
  int64_t experts = 0;               // <arch>.expert_count (0: none)
  int64_t heads = 0, kv_heads = 0;   // <arch>.attention.head_count(_kv) of layer 0 (kv absent: heads)
  bool importance = false;           // quantized with an imatrix (--calibration)
};

// A metadata integer: the scalar, or an array's first element; nullopt when absent or not an integer.
using MetadataInt = std::function<std::optional<int64_t>(const std::string& key)>;
MixtureModel mixture_model(const std::string& arch, const MetadataInt& get, bool importance);

struct MixtureTensor {
  std::string name;            // GGUF name
  std::vector<int64_t> shape;  // torch order; empty when unknown (only output.weight's row length is read)
  bool chosen = true;          // its type comes from the policy (not forced, not kept as stored)
};

// The file type's type (before the row-length fallback) of every chosen matrix that no override decides, in
// llama.cpp's order with its counters; `tensors`: every tensor of the file, in any order. Empty for a float type,
// a single K-quant (p.mixture null, p.type Q2_K ... Q5_K) or with p.pure. ArgumentError naming a tensor whose layer the rules need and cannot read, and (for a
// mixture that needs one, Q2_K_S) naming the first matrix that would be Q2_K without an importance matrix.
std::map<std::string, QuantType> resolve_mixture(const TensorPolicy& p, const MixtureModel& m,
                                                 const std::vector<MixtureTensor>& tensors);

}  // namespace attnzoo
