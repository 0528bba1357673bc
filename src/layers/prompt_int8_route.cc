#include "layers/prompt_int8_route.h"

#include <atomic>
#include <cstdlib>

#include "core/amx.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {

namespace {

// A PromptInt8Rows once set_linear_prompt_int8_rows ran; -1 before: ATTNZOO_PROMPT_INT8 decides.
std::atomic<int> g_prompt_int8{-1};

// Q5_0 / Q5_1 on the AVX2 rows (every x86 CPU: they have no VNNI rows): the fifth bits are or'ed in per 32 weights
// on every pass of 8 tokens, which the panels pay once per prompt. On the Zen 4, one thread, 2048 x 2048, CPU time
// against the f32 panels (OpenBLAS Haswell kernels, ATTNZOO_TARGET=avx2): 0.38-0.45x at 16 tokens, 0.58-0.72x at
// 32, 0.84-1.08x at 64, 1.13-1.43x at 128; against the bf16 panels on vdpbf16ps (avx512_bf16): 0.44-0.53x at 16,
// 1.26-1.72x at 64, 2.8-4.1x at 512.
constexpr int64_t kQ5RowsMaxTokens = 48;
constexpr int64_t kQ5RowsMaxTokensBf16 = 32;
// Q6_K on the VNNI rows against the bf16 panels (the same run): 0.65-0.71x at 16 tokens, 0.94-1.18x at 64,
// 1.0-1.24x at 512 (its 6-bit codes are rebuilt on every pass); against the f32 panels 0.62-0.67x at 512.
constexpr int64_t kQ6kVnniMaxTokensBf16 = 48;

bool fifth_bit_gguf(QuantType type) { return type == QuantType::Q5_0 || type == QuantType::Q5_1; }

}  // namespace

PromptInt8Rows prompt_int8_rows_rule(const char* env) {
  const std::string s = env ? env : "";
  if (s.empty() || s == "auto") return PromptInt8Rows::automatic;
  if (s == "0") return PromptInt8Rows::off;
  if (s == "1") return PromptInt8Rows::on;
  throw ArgumentError("ATTNZOO_PROMPT_INT8: expected auto, 0 or 1, got '" + s + "'");
}

void set_linear_prompt_int8_rows(PromptInt8Rows mode) { g_prompt_int8.store(int(mode), std::memory_order_relaxed); }

PromptInt8Rows linear_prompt_int8_rows() {
  const int m = g_prompt_int8.load(std::memory_order_relaxed);
  if (m >= 0) return PromptInt8Rows(m);
  // Read once and kept, as ATTNZOO_BF16_DOT and ATTNZOO_AMX are (a bad value throws again on the next call).
  static const PromptInt8Rows from_env = prompt_int8_rows_rule(std::getenv("ATTNZOO_PROMPT_INT8"));
  return from_env;
}

Int8RowsEngine prompt_int8_rows_engine(QuantType type, bool regrouped) {
  if (!quant_gemv_has_int8(type)) return Int8RowsEngine::none;
  // As quant_gemv picks (gemv.cc, int_rows_of): IQ4 has AVX2 rows regrouped only.
  if (quant_gemv_vnni_handles(type) && quant_gemv_vnni_enabled()) return Int8RowsEngine::vnni;
  const bool avx2 = quant_gemv_avx2_handles(type) || (regrouped && row_groups_iq4(type));
  return avx2 && quant_gemv_avx2_enabled() ? Int8RowsEngine::avx2 : Int8RowsEngine::portable;
}

const char* int8_rows_engine_name(Int8RowsEngine engine) {
  switch (engine) {
    case Int8RowsEngine::vnni: return "VNNI";
    case Int8RowsEngine::avx2: return "AVX2";
    case Int8RowsEngine::portable: return "portable";
    case Int8RowsEngine::none: break;
  }
  return "";
}

int64_t prompt_int8_auto_max_tokens(Int8RowsEngine engine, QuantType type, bool amx_bf16, bool bf16_panels) {
  // AMX tiles multiply the panels several times faster than either integer row (the Emerald Rapids Xeon,
  // docs/benchmarks/cpu-classes.md "Short prefill of block formats on AMX").
  if (amx_bf16) return 0;
  switch (engine) {
    case Int8RowsEngine::vnni:
      // vpdpbusd forms twice the products per instruction that vdpbf16ps does (four times an f32 FMA), from the
      // packed blocks, where the panels first decode every weight into bf16 pairs or f32 for only T tokens:
      // 0.33-0.38x the f32 panels' CPU time at 512 tokens, 0.54-0.90x the bf16 panels' (2048 x 2048, Q4_0, Q4_1,
      // Q8_0, Q4_K, Q5_K, IQ4_XS), all but Q6_K against bf16 panels.
      if (type == QuantType::Q6_K && bf16_panels) return kQ6kVnniMaxTokensBf16;
      return kPromptInt8EveryLength;
    case Int8RowsEngine::avx2:
      // Three instructions per 32 products (one per 64 on VNNI), still ahead of decoding the panels for every
      // 4-bit, 6-bit and 8-bit format at every measured length (Zen 4 as avx2, one thread, 2048 x 2048: Q4_0
      // 0.50-0.66x at 512 tokens, Q8_0 0.72-0.85x, Q4_K 0.68-0.98x; Q6_K and IQ4_XS about even at 512), but the
      // Q5_0 / Q5_1 rows lose from about 64 tokens.
      if (fifth_bit_gguf(type)) return bf16_panels ? kQ5RowsMaxTokensBf16 : kQ5RowsMaxTokens;
      return kPromptInt8EveryLength;
    case Int8RowsEngine::portable:  // int16 products in Highway lanes: no faster than the f32 panels' FMAs
    case Int8RowsEngine::none: break;
  }
  return 0;
}

int64_t linear_prompt_int8_max_tokens(QuantType type, bool regrouped) {
  if (!quant_gemv_has_int8(type)) return 0;
  switch (linear_prompt_int8_rows()) {
    case PromptInt8Rows::off: return 0;
    case PromptInt8Rows::on: return kPromptInt8EveryLength;
    case PromptInt8Rows::automatic: break;
  }
  return prompt_int8_auto_max_tokens(prompt_int8_rows_engine(type, regrouped), type, amx_bf16_enabled(),
                                     bf16_tiles_enabled());
}

bool linear_prompt_takes_int8_rows(QuantType type, int64_t T, bool regrouped) {
  return T <= linear_prompt_int8_max_tokens(type, regrouped);
}

}  // namespace attnzoo
