#pragma once
// The one place "auto" becomes formats: how the projection weights are held, the KV cache's element type and what
// the projections multiply with, chosen from what the checkpoint stores, the matmul precision and the CPU, each
// with the reason a user reads in `attnzoo inspect`. Every front end (CLI generate / chat / perplexity / serve /
// inspect / bench, Python Model.load and so Engine / LLM) resolves through resolve_formats; explicit values win.
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/quant_type.h"
#include "layers/matmul_precision.h"

namespace attnzoo {

class Config;

// What a checkpoint stores, as the choice reads it: the format of most of its matrix elements (2-D tensors and
// stacked experts; a safetensors checkpoint with MXFP4 experts counts as blocked).
struct CheckpointFormats {
  bool gguf = false;
  bool blocked = false;           // a block-quantized GGUF format (Q4_0 ... Q8_0, K-quants, MXFP4)
  DType dense = DType::f32;       // otherwise the element type: f32, bf16 or f16
  std::string stored = "float32";  // its name: a GGUF type ("Q4_1", "BF16") or config.json's dtype
  QuantType block_type = QuantType::F32;  // when blocked: that format (MXFP4 for gpt-oss's safetensors experts)
};

// A safetensors checkpoint's config.json dtype (f32 when unset); a GGUF file (or a directory holding one): its
// tensor table, without mapping the weights.
CheckpointFormats checkpoint_formats(const Config& config);
CheckpointFormats checkpoint_formats(const std::string& path);

// What the caller asked for: Model.load's dtype / kv_cache_dtype spellings ("auto" leaves it to the choice).
struct FormatRequest {
  std::string dtype = "auto";           // "auto", "float32" / "f32", "bfloat16" / "bf16"
  std::string kv_cache_dtype = "auto";  // "auto", "float32", "bfloat16", "float16", "int8", "fp8" (and spellings)
};

struct FormatChoice {
  DType weights = DType::f32;   // LoadOptions::weights
  DType kv_cache = DType::f32;  // PoolOptions::kv_dtype
  // The projections of most of the model's matrices under the matmul precision of the choice: products of
  // several tokens ("f32", "bf16", or "int8" where prompts over blocks take the integer rows) and the
  // activations of one token's GEMV ("f32" or "int8").
  std::string prefill_products = "f32", decode_activations = "f32";
  // Prompts over the checkpoint's blocks up to this many tokens take the integer rows int8_rows names ("VNNI",
  // "AVX2", "portable"); 0: none; prefill_products is "int8" when every length does.
  int64_t int8_prompt_max_tokens = 0;
  std::string int8_rows;
  std::string checkpoint;  // what the checkpoint stores, e.g. "GGUF, mostly Q4_1"
  std::string weights_reason, kv_cache_reason, products_reason;
};

// What this CPU and SIMD target multiply several tokens with when products may be reduced.
struct ProductRoutes {
  bool bf16_tiles = false;    // bf16 on tiles (bf16_tiles_enabled(): AMX, or vdpbf16ps where preferred)
  // Prompts over the checkpoint's blocks up to this many tokens take the integer rows (0: none,
  // kPromptInt8EveryLength: all; linear_prompt_int8_max_tokens of its block_type), which int8_rows names.
  int64_t int8_prompt_max_tokens = 0;
  std::string int8_rows = "VNNI";  // "VNNI", "AVX2", "AVX-VNNI" (the regrouped AVX2 rows on it), "portable"
  bool int8_forced = false;        // ATTNZOO_PROMPT_INT8=1 sends every prompt there, whatever the CPU class
};

// The choice itself, from its inputs alone (tests give every combination). ArgumentError naming dtype /
// kv_cache_dtype for an unknown spelling.
FormatChoice resolve_formats(const CheckpointFormats& checkpoint, const FormatRequest& request,
                             MatmulPrecision precision, const ProductRoutes& routes);
// Under the process's matmul precision and this CPU's routes.
FormatChoice resolve_formats(const CheckpointFormats& checkpoint, const FormatRequest& request);
FormatChoice resolve_formats(const std::string& path, const FormatRequest& request);

// An explicit KV dtype name ("float32", "bfloat16", "float16", "int8", "fp8" and spellings; not "auto").
DType parse_kv_cache_dtype(const std::string& dtype);

// "weights      bf16 (reason)\n..." lines for inspect and serve's startup log, each line starting with `indent`.
std::string describe_formats(const FormatChoice& choice, const std::string& indent);

}  // namespace attnzoo
