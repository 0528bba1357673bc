#pragma once
// Which prompts over block weights take quant_gemv's 8-bit integer rows instead of the dequantized panels (the
// bf16 GEMM or f32 OpenBLAS), per CPU class, format and token count: the one place the rule lives (Linear's route,
// format_choice's startup description and `bench model`'s ceiling read it).
#include <cstdint>
#include <string>

#include "core/quant_type.h"

namespace attnzoo {

// Prompts (T > kGemvMaxTokens) over block weights with reduced products. "auto": the rule below; "off": the
// panels everywhere; "on": the integer rows wherever a format has them. Process-wide, from ATTNZOO_PROMPT_INT8
// (auto / 0 / 1) at the first prompt unless set before; set it between calls (benchmarks, tests). A bad
// ATTNZOO_PROMPT_INT8 is an ArgumentError naming it.
enum class PromptInt8Rows { automatic, off, on };
// The setting, pure: `env` (ATTNZOO_PROMPT_INT8's value; null or empty when unset) "auto" / "0" / "1";
// ArgumentError naming ATTNZOO_PROMPT_INT8 for another value.
PromptInt8Rows prompt_int8_rows_rule(const char* env);
void set_linear_prompt_int8_rows(PromptInt8Rows mode);
PromptInt8Rows linear_prompt_int8_rows();

// The integer rows quant_gemv runs a format on: the VNNI rows (vpdpbusd), the AVX2 rows (vpmaddubsw + vpmaddwd, or
// AVX-VNNI in the regrouped ones), the portable int16 rows (scalar target; IQ4 rows not regrouped), none (a format
// without integer rows). `regrouped`: the rows held in groups of 16 (row_groups.h), as Linear holds them.
enum class Int8RowsEngine { none, portable, avx2, vnni };
Int8RowsEngine prompt_int8_rows_engine(QuantType type, bool regrouped = true);
const char* int8_rows_engine_name(Int8RowsEngine engine);  // "", "portable", "AVX2", "VNNI"

// "auto", pure (tests give every CPU class): the longest prompt over `type` on `engine` that takes the integer
// rows (0: none, kPromptInt8EveryLength: every length), where `amx_bf16` says AMX tiles multiply the panels and
// `bf16_panels` says vdpbf16ps does (else the panels are f32 on OpenBLAS).
constexpr int64_t kPromptInt8EveryLength = INT64_MAX;
int64_t prompt_int8_auto_max_tokens(Int8RowsEngine engine, QuantType type, bool amx_bf16, bool bf16_panels);
// The longest prompt over `type` that takes the integer rows here, under the setting and this CPU / target.
int64_t linear_prompt_int8_max_tokens(QuantType type, bool regrouped = true);
// Whether a prompt of T > kGemvMaxTokens tokens over `type` takes the integer rows here.
bool linear_prompt_takes_int8_rows(QuantType type, int64_t T, bool regrouped = true);

}  // namespace attnzoo
