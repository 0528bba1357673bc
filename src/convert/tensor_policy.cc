#include "convert/tensor_policy.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <stdexcept>

#include "convert/ftype_mixture.h"

#include "core/error.h"
#include "kernels/quant/quantize.h"

namespace attnzoo {
namespace {

constexpr QuantType kWritable[] = {QuantType::F32,  QuantType::F16,  QuantType::BF16, QuantType::Q8_0,
                                   QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1,
                                   QuantType::Q2_K, QuantType::Q3_K, QuantType::Q4_K, QuantType::Q5_K,
                                   QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS};

bool fits(QuantType t, int64_t cols) { return quant_row_bytes(t, cols).has_value(); }

bool matches(const std::string& pattern, const std::string& name, const char* flag) {
  try {
    return std::regex_search(name, std::regex(pattern));
  } catch (const std::regex_error& e) {
    throw ArgumentError(std::string(flag) + ": pattern '" + pattern + "' is not a valid regular expression: " +
                        e.what());
  }
}

bool is_float(QuantType t) { return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16; }

}  // namespace

// llama.cpp's fallbacks for rows that are not whole super-blocks.
QuantType fit_to_row(QuantType t, int64_t cols) {
  if (fits(t, cols)) return t;
  QuantType smaller = QuantType::F16;
  switch (t) {
    case QuantType::Q2_K: case QuantType::Q3_K: smaller = QuantType::Q4_0; break;
    case QuantType::Q4_K: smaller = QuantType::Q5_0; break;
    case QuantType::Q5_K: smaller = QuantType::Q5_1; break;
    case QuantType::Q6_K: smaller = QuantType::Q8_0; break;
    case QuantType::IQ4_XS: smaller = QuantType::IQ4_NL; break;  // the same grid in blocks of 32
    default: break;
  }
  return fits(smaller, cols) ? smaller : QuantType::F16;
}

QuantType parse_quant_type(const std::string& name, const std::string& what) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  std::string known;
  for (QuantType t : kWritable) {
    if (upper == quant_type_name(t)) return t;
    known += (known.empty() ? "" : ", ") + std::string(quant_type_name(t));
  }
  throw ArgumentError(what + ": unknown type '" + name + "' (choose from " + known + ")");
}

namespace {

// The type the first override naming `gguf_name` gives it (--tensor-type, --keep: `source`, --output-tensor-type,
// --token-embedding-type, in that order of strength), before the row fallback; nullopt when none does.
std::optional<QuantType> override_type(const TensorPolicy& p, const std::string& gguf_name, QuantType source) {
  for (const auto& [pattern, type] : p.tensor_types)
    if (matches(pattern, gguf_name, "tensor_types (--tensor-type)")) return type;
  for (const std::string& pattern : p.keep)
    if (matches(pattern, gguf_name, "keep (--keep)")) return source;
  if (gguf_name == "output.weight" && p.output_type) return p.output_type;
  // Gemma 3n's per-layer embedding table is a token embedding to llama-quantize as well.
  if ((gguf_name == "token_embd.weight" || gguf_name == "per_layer_token_embd.weight") && p.token_embedding_type)
    return p.token_embedding_type;
  return std::nullopt;
}

}  // namespace

bool overridden(const TensorPolicy& p, const std::string& gguf_name) {
  return override_type(p, gguf_name, QuantType::F32).has_value();
}

QuantType choose_tensor_type(const TensorPolicy& p, const std::string& gguf_name, const std::vector<int64_t>& shape,
                             QuantType source) {
  if (shape.size() < 2) return QuantType::F32;  // norms, biases: tiny, and precision-critical
  const int64_t cols = shape.back();
  // a kept source type fits its own rows: the fallback leaves it
  if (const std::optional<QuantType> t = override_type(p, gguf_name, source)) return fit_to_row(*t, cols);
  const bool head = gguf_name == "output.weight", embed = gguf_name == "token_embd.weight";
  if (p.pure || is_float(p.type)) return fit_to_row(p.type, cols);
  if (const auto it = p.mixture_types.find(gguf_name); it != p.mixture_types.end()) return fit_to_row(it->second, cols);
  if (p.mixture)
    throw std::logic_error("quantize: tensor '" + gguf_name + "' was not in the list its mixture was resolved on");
  // a single type not resolved over its file (resolve_mixture): the embedding taken as tied, as llama.cpp takes it
  // until it sees output.weight
  if (head || embed) return fit_to_row(p.type == QuantType::Q8_0 ? QuantType::Q8_0 : QuantType::Q6_K, cols);
  return fit_to_row(p.type, cols);
}

uint32_t llama_file_type(QuantType t) {
  switch (t) {
    case QuantType::F32: return 0;
    case QuantType::F16: return 1;
    case QuantType::Q4_0: return 2;
    case QuantType::Q4_1: return 3;
    case QuantType::Q8_0: return 7;
    case QuantType::Q5_0: return 8;
    case QuantType::Q5_1: return 9;
    case QuantType::Q2_K: return 10;  // MOSTLY_Q2_K
    case QuantType::Q3_K: return 11;  // Q3_K_S: every matrix Q3_K
    case QuantType::Q4_K: return 14;  // Q4_K_S: every matrix Q4_K
    case QuantType::Q5_K: return 16;  // Q5_K_S
    case QuantType::Q6_K: return 18;
    case QuantType::IQ4_NL: return 25;
    case QuantType::IQ4_XS: return 30;
    case QuantType::BF16: return 32;
    default: throw ArgumentError(std::string("no llama.cpp file type for ") + quant_type_name(t));
  }
}

uint32_t llama_file_type(const TensorPolicy& p) {
  return p.mixture ? p.mixture->file_type : llama_file_type(p.type);
}

}  // namespace attnzoo
