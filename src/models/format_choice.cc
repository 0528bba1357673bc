#include "models/format_choice.h"

#include <map>

#include "core/dispatch.h"
#include "core/error.h"
#include "core/quant_type.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"
#include "layers/linear.h"
#include "loader/config.h"
#include "loader/gguf.h"
#include "loader/model_dir.h"

namespace attnzoo {
namespace {

// The KV element type of a block-quantized model. llama.cpp's default is f16; bf16 is taken here: the same bytes
// (what a decode step streams), f32's exponent range (f16 turns keys or values past 65504 into infinities), and
// conversions that are a shift, vectorised on every target (cache writes and prefill's tile packing convert f16
// element by element). Decode after a 500-token prompt, same process: bf16 1.11x the f32 cache's speed, f16 0.94x;
// perplexity and the runs in docs/benchmarks/default-formats.md.
constexpr DType kBlockedKv = DType::bf16;

bool exact_precision(MatmulPrecision p) { return p == MatmulPrecision::highest || p == MatmulPrecision::high; }

std::string precision_words(MatmulPrecision p) { return std::string("matmul precision '") + matmul_precision_name(p) + "'"; }

void choose_weights(const CheckpointFormats& c, const std::string& asked, MatmulPrecision precision, FormatChoice& f) {
  if (asked == "float32" || asked == "f32" || asked == "bfloat16" || asked == "bf16") {
    f.weights = asked[0] == 'f' ? DType::f32 : DType::bf16;
    f.weights_reason = "asked for (dtype " + asked + ")";
    return;
  }
  if (asked != "auto") throw ArgumentError("dtype: expected 'float32', 'bfloat16' or 'auto', got '" + asked + "'");
  if (c.blocked) {
    f.weights = DType::f32;
    f.weights_reason = "block-quantized: the blocks are computed on as stored, the few dense tensors held as f32";
  } else if (c.dense == DType::f32) {
    f.weights = DType::f32;
    f.weights_reason = "stored as f32";
  } else if (exact_precision(precision)) {
    f.weights = DType::f32;
    f.weights_reason = std::string("stored as ") + dtype_name(c.dense) + ", widened exactly: " +
                       precision_words(precision) + " asks for f32 arithmetic";
  } else {
    f.weights = DType::bf16;
    f.weights_reason = c.dense == DType::bf16 ? "stored as bf16, held as stored (half the bytes of f32)"
                                              : "stored as f16, held as bf16 (the products round to bf16 anyway)";
  }
}

void choose_kv_cache(const CheckpointFormats& c, const std::string& asked, MatmulPrecision precision, FormatChoice& f) {
  if (asked != "auto") {
    f.kv_cache = parse_kv_cache_dtype(asked);
    f.kv_cache_reason = "asked for (kv_cache_dtype " + asked + ")";
  } else if (f.weights == DType::bf16) {
    f.kv_cache = DType::bf16;
    f.kv_cache_reason = "follows the bf16 weights";
  } else if (c.blocked && !exact_precision(precision)) {
    f.kv_cache = kBlockedKv;
    f.kv_cache_reason = "block-quantized weights: a 16-bit cache as llama.cpp holds one (half the bytes a decode "
                        "step reads; bf16 rather than llama.cpp's f16 for f32's range)";
  } else {
    f.kv_cache = DType::f32;
    f.kv_cache_reason = exact_precision(precision) ? precision_words(precision) + " asks for f32 arithmetic"
                                                    : "f32 weights, f32 arithmetic";
  }
}

void choose_products(const CheckpointFormats& c, MatmulPrecision precision, const ProductRoutes& routes,
                     FormatChoice& f) {
  // As reduced_products() decides per projection at run time, for the matrices most of the model holds.
  const bool reduced_weights = c.blocked || f.weights == DType::bf16;
  const bool reduced = precision == MatmulPrecision::medium || (precision == MatmulPrecision::automatic && reduced_weights);
  if (!reduced) {
    f.products_reason = precision == MatmulPrecision::automatic ? "f32-held weights keep f32 products"
                                                                : precision_words(precision) + ": f32 products";
    return;
  }
  const int64_t int8_max = c.blocked ? routes.int8_prompt_max_tokens : 0;
  const bool int8_prompts = int8_max == kPromptInt8EveryLength;
  f.int8_prompt_max_tokens = int8_max;
  f.int8_rows = int8_max > 0 ? routes.int8_rows : "";
  f.prefill_products = int8_prompts ? "int8" : routes.bf16_tiles ? "bf16" : "f32";
  f.decode_activations = c.blocked ? "int8" : "f32";
  f.products_reason = precision_words(precision) + (precision == MatmulPrecision::automatic
                                                        ? (c.blocked ? " with block-quantized weights"
                                                                     : " with bf16-held weights")
                                                        : "");
  const std::string rows = "8-bit activations on the " + routes.int8_rows + " integer rows";
  if (int8_prompts && routes.int8_forced) {
    f.products_reason += ", " + rows + " for several tokens (forced by ATTNZOO_PROMPT_INT8=1, whether or not they "
                         "beat the panels on this CPU class)";
  } else if (int8_prompts) {
    f.products_reason += ", " + rows + " for several tokens (fewer CPU seconds than the " +
                         std::string(routes.bf16_tiles ? "bf16" : "f32") +
                         " panels on this CPU class; ATTNZOO_PROMPT_INT8=0 keeps the panels)";
  } else {
    if (int8_max > 0)
      f.products_reason += ", " + rows + " up to " + std::to_string(int8_max) +
                           " tokens (faster there, slower beyond; ATTNZOO_PROMPT_INT8=0 / 1 for none / all)";
    f.products_reason += routes.bf16_tiles
                             ? std::string(int8_max > 0 ? ", then" : ",") +
                                   " bf16 tiles for several tokens (AMX where the CPU has it, else vdpbf16ps)"
                             : std::string(int8_max > 0 ? ", then" : ",") +
                                   " widened to f32 for several tokens (neither AMX nor AVX-512-BF16 on this CPU / "
                                   "target, or bf16 dot products off: see attnzoo info)";
  }
  f.products_reason += c.blocked ? ", llama.cpp's integer dots for one" : ", one token's GEMV bound by memory";
}

}  // namespace

CheckpointFormats checkpoint_formats(const Config& config) {
  CheckpointFormats c;
  const std::string d = config.dtype();
  // Another dtype (an fp8 release, say) is for the loader to judge tensor by tensor; its "auto" is f32.
  const bool known = d.empty() || d == "float32" || d == "float" || d == "bfloat16" || d == "float16" || d == "half";
  c.dense = known ? config.dtype_or(DType::f32) : DType::f32;
  c.stored = known ? dtype_name(c.dense) : d;
  // gpt-oss's MXFP4 experts, most of its elements, are computed on as GGUF's MXFP4 blocks: as a blocked GGUF
  if (config.has("quantization_config") &&
      config.sub("quantization_config").get_string_or("quant_method", "") == "mxfp4") {
    c.blocked = true;
    c.block_type = QuantType::MXFP4;
    c.dense = DType::f32;
    c.stored += " with MXFP4 experts";
  }
  return c;
}

CheckpointFormats checkpoint_formats(const std::string& path) {
  const std::optional<std::string> gguf = find_model_gguf(path);
  if (!gguf) return checkpoint_formats(ModelFiles::read_config(path));
  // Weighed by elements: the projections (stacked experts included), not the many small norm vectors, say how the
  // model computes.
  std::map<QuantType, double> elements;
  for (const GgufTensor& t : GgufFile::open_shared(*gguf)->tensors()) {
    if (t.ne.size() < 2) continue;
    double n = 1;
    for (int64_t d : t.ne) n *= double(d);
    elements[t.type] += n;
  }
  CheckpointFormats c;
  c.gguf = true;
  QuantType most = QuantType::F32;
  double most_elements = -1;
  for (const auto& [type, n] : elements)
    if (n > most_elements) most = type, most_elements = n;
  c.blocked = quant_is_blocked(most);
  if (c.blocked) c.block_type = most;
  c.dense = c.blocked ? DType::f32 : dtype_of(most).value_or(DType::f32);
  c.stored = quant_type_name(most);
  return c;
}

DType parse_kv_cache_dtype(const std::string& dtype) {
  if (dtype == "float32" || dtype == "f32") return DType::f32;
  if (dtype == "bfloat16" || dtype == "bf16") return DType::bf16;
  if (dtype == "float16" || dtype == "f16") return DType::f16;
  // vLLM's spellings: "fp8" is e4m3 there too. Both store one f32 scale per token and head beside the bytes.
  if (dtype == "int8") return DType::i8;
  if (dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "float8_e4m3fn") return DType::f8_e4m3;
  throw ArgumentError("kv_cache_dtype: expected 'auto', 'float32', 'bfloat16', 'float16', 'int8' or 'fp8', got '" +
                      dtype + "'");
}

FormatChoice resolve_formats(const CheckpointFormats& checkpoint, const FormatRequest& request,
                             MatmulPrecision precision, const ProductRoutes& routes) {
  FormatChoice f;
  f.checkpoint = checkpoint.gguf ? "GGUF, mostly " + checkpoint.stored : "safetensors, dtype " + checkpoint.stored;
  choose_weights(checkpoint, request.dtype, precision, f);
  choose_kv_cache(checkpoint, request.kv_cache_dtype, precision, f);
  choose_products(checkpoint, precision, routes, f);
  return f;
}

FormatChoice resolve_formats(const CheckpointFormats& checkpoint, const FormatRequest& request) {
  ProductRoutes routes;
  routes.bf16_tiles = bf16_tiles_enabled();
  if (checkpoint.blocked) {
    routes.int8_prompt_max_tokens = linear_prompt_int8_max_tokens(checkpoint.block_type);
    const Int8RowsEngine engine = prompt_int8_rows_engine(checkpoint.block_type);
    // The regrouped AVX2 rows multiply with AVX-VNNI's vpdpbusd where the CPU has it; `bench model` rates a prompt
    // on them against that instruction's peak, the other AVX2 rows against vpmaddubsw + vpmaddwd's.
    const bool avx_vnni = engine == Int8RowsEngine::avx2 && row_groups_format(checkpoint.block_type) &&
                          quant_gemv_groups_avx_vnni_enabled();
    routes.int8_rows = avx_vnni ? "AVX-VNNI" : int8_rows_engine_name(engine);
    routes.int8_forced = linear_prompt_int8_rows() == PromptInt8Rows::on;
  }
  return resolve_formats(checkpoint, request, matmul_precision(), routes);
}

FormatChoice resolve_formats(const std::string& path, const FormatRequest& request) {
  return resolve_formats(checkpoint_formats(path), request);
}

std::string describe_formats(const FormatChoice& f, const std::string& indent) {
  std::string s;
  s += indent + "checkpoint   " + f.checkpoint + "\n";
  s += indent + "weights      " + dtype_name(f.weights) + ": " + f.weights_reason + "\n";
  s += indent + "kv cache     " + dtype_name(f.kv_cache) + ": " + f.kv_cache_reason + "\n";
  s += indent + "products     " + f.prefill_products + " for several tokens, " + f.decode_activations +
       " activations for one: " + f.products_reason + "\n";
  return s;
}

}  // namespace attnzoo
