// attnzoo quantize: a Hugging Face checkpoint written as a quantized GGUF file (src/convert/gguf_export.h).
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/usage.h"
#include "convert/calibration.h"
#include "convert/ftype_mixture.h"
#include "convert/gguf_export.h"
#include "core/error.h"

namespace attnzoo::cli {
namespace {

const char* kUsage =
    "usage: attnzoo quantize -m DIR|IN.gguf -o OUT.gguf [--type T] [--pure] [--output-tensor-type T]\n"
    "                        [--token-embedding-type T] [--tensor-type PATTERN=T]... [--keep PATTERN]...\n"
    "                        [--allow-requantize]\n"
    "                        [--calibration FILE [--calibration-chunk N] [--calibration-tokens N]]\n"
    "  writes the checkpoint in DIR (safetensors of a family README.md's quantization row lists; another class is\n"
    "  refused, naming those) as a GGUF file laid out as llama.cpp's converter writes it (read by the gguf package,\n"
    "  transformers and attnzoo); or, as llama-quantize does, the GGUF file IN.gguf (F32 / F16 / BF16 tensors)\n"
    "  with every metadata key, tensor name, order and alignment kept and each tensor in the type the same policy\n"
    "  gives its GGUF name (general.file_type updated)\n"
    "  --type T                 llama-quantize's type names, with its meaning (default Q8_0):\n"
    "                           one type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or Q6_K; norms and biases\n"
    "                           stay F32, the output head (and a tied embedding) take Q8_0 (for Q8_0) or Q6_K\n"
    "                           (for lower-bit types), an untied embedding the main type, an 8-expert model's\n"
    "                           attn_k / attn_v Q8_0 and, with --calibration, Q4_0 / Q5_0's first eighth of\n"
    "                           ffn_down Q4_1 / Q5_1, as llama-quantize does; rows that are not whole blocks\n"
    "                           fall back as llama-quantize's do\n"
    "                           (Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL;\n"
    "                           F16 for rows not of 32s);\n"
    "                           or one of llama-quantize's mixtures, tensor for tensor as it writes them:\n"
    "                           Q2_K (also Q2_K_M: Q2_K, attn_v Q3_K (Q4_K with 4+ query heads per KV head),\n"
    "                           ffn_down and attn_output Q3_K), Q2_K_S (Q2_K, attn_v Q4_K with 4+ query heads\n"
    "                           per KV head, the first eighth of ffn_down Q4_K; needs --calibration, as\n"
    "                           llama-quantize needs an imatrix), Q3_K_S (Q3_K), Q3_K_M = Q3_K (Q3_K, the first 2\n"
    "                           attn_v and the first sixteenth of ffn_down Q5_K, the other attn_v, ffn_down and\n"
    "                           attn_output Q4_K), Q3_K_L (Q3_K, attn_v, ffn_down and attn_output Q5_K),\n"
    "                           Q4_K_M = Q4_K / Q5_K_M = Q5_K (Q4_K / Q5_K, with attn_v and ffn_down in Q6_K in\n"
    "                           the first and last eighth of the layers and every third between), Q4_K_S (Q4_K,\n"
    "                           the first 4 attn_v and the first eighth of ffn_down in Q5_K), Q5_K_S (Q5_K),\n"
    "                           IQ4_NL / IQ4_XS (attn_v in Q5_K with 4+ query heads per KV head, the first\n"
    "                           eighth of ffn_down in Q5_K without --calibration); in all of them the head (and a\n"
    "                           tied embedding) Q6_K, an untied embedding the main type, an 8-expert model's\n"
    "                           attn_k / attn_v Q8_0 (and its attn_output Q5_K but in Q2_K_S, Q3_K_L, Q5_K_S /\n"
    "                           Q5_K_M); the table is in src/convert/ftype_mixture.h.\n"
    "                           Every matrix in one K-quant: --type Q2_K|Q3_K|Q4_K|Q5_K --pure\n"
    "  --pure                   every matrix in the main type, the head and embedding too, no mixture rules\n"
    "                           (llama-quantize's flag; general.file_type still names --type, Q4_K_M for Q4_K)\n"
    "  --output-tensor-type T   the output head's type\n"
    "  --token-embedding-type T the token embedding's type\n"
    "  --tensor-type PATTERN=T  tensors whose GGUF name matches the regex PATTERN take T (first match wins)\n"
    "  --keep PATTERN           tensors matching PATTERN keep the checkpoint's own type\n"
    "                           (the four overrides are stronger than a mixture; tensors they decide are not\n"
    "                           counted by its rules, as in llama-quantize)\n"
    "  --allow-requantize       a GGUF source's block-quantized tensors (Q8_0, Q4_K ...) are dequantized and\n"
    "                           quantized again (the two roundings add up); without it they are refused by name\n"
    "                           unless their type stays (then copied)\n"
    "  --calibration FILE       importance-weighted quantization (llama.cpp's imatrix): the model runs on FILE's\n"
    "                           text first, in chunks of --calibration-chunk tokens (default 512; at most\n"
    "                           --calibration-tokens, default all), and each weight's rounding error is weighted\n"
    "                           by its input channel's mean squared activation (Q4_0, Q4_1, Q5_0, Q5_1, the\n"
    "                           K-quants and IQ4; their bytes then differ from plain rounding by design)\n";

}  // namespace

int run_quantize(const std::vector<std::string>& args) {
  std::string model, out, calibration;
  int64_t chunk = 512, max_tokens = 0;
  QuantizeOptions o;
  auto count = [](const std::string& flag, const std::string& v) -> int64_t {
    try {
      size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used == v.size() && n >= 0) return n;
    } catch (...) {
    }
    throw ArgumentError(flag + ": expected a non-negative integer, got '" + v + "'");
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    if (s == "-m" || s == "--model") {
      model = value();
    } else if (s == "-o" || s == "--output") {
      out = value();
    } else if (s == "--type") {
      set_file_type(o.policy, value(), "--type");
    } else if (s == "--pure") {
      o.policy.pure = true;
    } else if (s == "--output-tensor-type") {
      o.policy.output_type = parse_quant_type(value(), s);
    } else if (s == "--token-embedding-type") {
      o.policy.token_embedding_type = parse_quant_type(value(), s);
    } else if (s == "--tensor-type") {
      const std::string& v = value();
      const size_t eq = v.rfind('=');
      if (eq == std::string::npos || eq == 0)
        throw ArgumentError("--tensor-type: expected PATTERN=TYPE, got '" + v + "'");
      o.policy.tensor_types.emplace_back(v.substr(0, eq), parse_quant_type(v.substr(eq + 1), "--tensor-type"));
    } else if (s == "--allow-requantize") {
      o.allow_requantize = true;
    } else if (s == "--keep") {
      o.policy.keep.push_back(value());
    } else if (s == "--calibration") {
      calibration = value();
    } else if (s == "--calibration-chunk") {
      chunk = count(s, value());
    } else if (s == "--calibration-tokens") {
      max_tokens = count(s, value());
    } else if (is_help(s)) {
      throw HelpRequested(kUsage);
    } else {
      throw_unknown_option("quantize", s, kUsage);
    }
  }
  if (model.empty())
    throw ArgumentError("quantize: -m DIR (a Hugging Face checkpoint directory) or -m IN.gguf is required");
  if (out.empty()) throw ArgumentError("quantize: -o OUT.gguf is required");

  refuse_output_over_source(model, out);  // before calibration's forward passes
  if (!calibration.empty()) {
    CalibrationStats c = collect_importance(model, calibration, chunk, max_tokens, "--calibration");
    std::printf("calibration: %lld tokens in %lld chunks, importance for %zu projections\n", (long long)c.tokens,
                (long long)c.chunks, c.importance.size());
    o.importance = std::move(c.importance);
  }
  const QuantizeSummary s = quantize_checkpoint(model, out, o);
  std::map<std::string, int> by_type;
  for (const QuantizedTensor& t : s.tensors) ++by_type[quant_type_name(t.type)];
  std::string types;
  for (const auto& [name, n] : by_type) types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  const std::string aside =
      s.set_aside ? ", " + std::to_string(s.set_aside) + " tensors outside the language model left out" : "";
  if (s.requantized)
    std::fprintf(stderr, "warning: %zu block-quantized tensors of %s dequantized and quantized again "
                 "(--allow-requantize): the file carries both roundings\n", s.requantized, model.c_str());
  std::printf("%s: %s, %zu tensors (%s), %.2f MiB -> %.2f MiB%s%s\n", out.c_str(), s.architecture.c_str(),
              s.tensors.size(), types.c_str(), double(s.bytes_in) / (1 << 20), double(s.bytes_out) / (1 << 20),
              aside.c_str(), s.tokenizer                                ? ""
                             : std::filesystem::is_regular_file(model) ? " (no tokenizer.ggml.* keys in the source)"
                                                                       : " (no tokenizer.json: no tokenizer metadata)");
  return 0;
}

}  // namespace attnzoo::cli
