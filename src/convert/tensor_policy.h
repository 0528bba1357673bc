#pragma once
// Which GGUF type each tensor of a checkpoint is written in, following llama.cpp's llama-quantize defaults:
//   - 1-D tensors (norms, biases, RoPE factors) stay F32;
//   - a single type (--type Q8_0, Q4_0, Q6_K ...): the output head (output.weight) and a tied token embedding take
//     Q8_0 when the type is Q8_0 and Q6_K for every lower-bit type (the float types keep themselves); an untied
//     embedding keeps the main type, as llama-quantize keeps it (--token-embedding-type Q6_K raises it); an
//     8-expert model's attn_k / attn_v Q8_0; with an imatrix, Q4_0 / Q5_0's first ffn_down layers Q4_1 / Q5_1
//     (ftype_mixture.h: these read the whole file, and resolve_mixture settles them into `mixture_types`);
//   - a mixture (--type Q2_K (= Q2_K_M), Q2_K_S, Q3_K_S / M / L, Q4_K_S / M, Q5_K_S / M, IQ4_NL, IQ4_XS; Q3_K,
//     Q4_K and Q5_K are llama-quantize's aliases of the _M ones): llama-quantize's per-tensor rules, exactly
//     (ftype_mixture.h), settled over the whole file first (resolve_mixture fills `mixture_types`);
//   - --pure: every matrix the main type, the head and embedding included (llama-quantize's flag);
//   - a matrix whose rows are not whole blocks of the requested type falls back as llama.cpp does (Q2_K, Q3_K ->
//     Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL for rows of 32s; F16 when not even that);
//   - overrides, in order of strength: --tensor-type PATTERN=TYPE (the first pattern found in the GGUF name wins,
//     a regex as in llama.cpp), --keep PATTERN (the checkpoint's own float type), --output-tensor-type,
//     --token-embedding-type. An override that does not fit the row length falls back the same way.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/quant_type.h"

namespace attnzoo {

struct FileMixture;  // ftype_mixture.h

struct TensorPolicy {
  QuantType type = QuantType::Q8_0;                  // the file's main type (--type)
  const FileMixture* mixture = nullptr;              // --type naming a mixture (set_file_type)
  bool pure = false;                                 // --pure
  std::optional<QuantType> output_type;              // --output-tensor-type
  std::optional<QuantType> token_embedding_type;     // --token-embedding-type (per_layer_token_embd too)
  std::vector<std::pair<std::string, QuantType>> tensor_types;  // --tensor-type PATTERN=TYPE
  std::vector<std::string> keep;                     // --keep PATTERN
  std::map<std::string, QuantType> mixture_types;    // resolve_mixture's result, by GGUF name (single types too)
};

// The type name as llama.cpp spells it ("Q4_K", "BF16"; case-insensitive) -> a type quantize_matrix writes;
// ArgumentError naming `what` and listing the choices otherwise.
QuantType parse_quant_type(const std::string& name, const std::string& what);

// Whether an override (--tensor-type, --keep, --output-tensor-type, --token-embedding-type) decides `gguf_name`.
// ArgumentError for an invalid pattern (naming it).
bool overridden(const TensorPolicy& p, const std::string& gguf_name);

// The type of GGUF tensor `gguf_name` with torch shape `shape`, stored in the checkpoint as `source` (F32 / F16 /
// BF16). ArgumentError for an invalid pattern (naming it); std::logic_error for a mixture whose types were not
// resolved for this tensor.
QuantType choose_tensor_type(const TensorPolicy& p, const std::string& gguf_name, const std::vector<int64_t>& shape,
                             QuantType source);

// `t` as llama.cpp's fallback leaves it for rows of `cols` values.
QuantType fit_to_row(QuantType t, int64_t cols);

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for a main type.
uint32_t llama_file_type(QuantType t);
// ... and for a policy: its mixture's when it has one.
uint32_t llama_file_type(const TensorPolicy& p);

}  // namespace attnzoo
