// What the startup description says of the prompt route for each CPU class's ProductRoutes (the choice is pure:
// every class is checked on any machine).
#include <gtest/gtest.h>

#include <string>

#include "layers/prompt_int8_route.h"
#include "models/format_choice.h"

namespace attnzoo {
namespace {

CheckpointFormats gguf_blocks(QuantType type) {
  CheckpointFormats c;
  c.gguf = c.blocked = true;
  c.block_type = type;
  c.stored = quant_type_name(type);
  return c;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// VNNI rows at every length (Zen 4, Xeons without AMX): int8 products, the rows named.
TEST(FormatChoiceRoutes, EveryLengthOnTheRowsReadsInt8) {
  ProductRoutes r;
  r.bf16_tiles = true;
  r.int8_prompt_max_tokens = kPromptInt8EveryLength;
  r.int8_rows = "VNNI";
  const FormatChoice f = resolve_formats(gguf_blocks(QuantType::Q4_0), {}, MatmulPrecision::automatic, r);
  EXPECT_EQ(f.prefill_products, "int8");
  EXPECT_EQ(f.int8_prompt_max_tokens, kPromptInt8EveryLength);
  EXPECT_EQ(f.int8_rows, "VNNI");
  EXPECT_TRUE(has(f.products_reason, "8-bit activations on the VNNI integer rows for several tokens"))
      << f.products_reason;
  EXPECT_TRUE(has(f.products_reason, "than the bf16 panels")) << f.products_reason;
  // The AVX2 rows at every length (an AVX2 CPU, Q4_0): the same, naming them and the f32 panels they beat.
  r.bf16_tiles = false;
  r.int8_rows = "AVX2";
  const FormatChoice a = resolve_formats(gguf_blocks(QuantType::Q4_0), {}, MatmulPrecision::automatic, r);
  EXPECT_EQ(a.prefill_products, "int8");
  EXPECT_TRUE(has(a.products_reason, "AVX2 integer rows for several tokens")) << a.products_reason;
  EXPECT_TRUE(has(a.products_reason, "than the f32 panels")) << a.products_reason;
}

// ATTNZOO_PROMPT_INT8=1 sends every prompt to the rows on any class (the portable ones included): the description
// says the setting chose them, not that they are faster here.
TEST(FormatChoiceRoutes, ForcedRowsSayTheSettingChoseThem) {
  ProductRoutes r;
  r.int8_prompt_max_tokens = kPromptInt8EveryLength;
  r.int8_rows = "portable";
  r.int8_forced = true;
  const FormatChoice f = resolve_formats(gguf_blocks(QuantType::IQ4_NL), {}, MatmulPrecision::automatic, r);
  EXPECT_EQ(f.prefill_products, "int8");
  EXPECT_TRUE(has(f.products_reason, "portable integer rows for several tokens (forced by ATTNZOO_PROMPT_INT8=1"))
      << f.products_reason;
  EXPECT_FALSE(has(f.products_reason, "fewer CPU seconds")) << f.products_reason;
}

// Rows up to a length (Q5_0 on the AVX2 rows): the panels' products, and the description gives the bound.
TEST(FormatChoiceRoutes, ShortPromptsOnTheRowsNameTheBound) {
  ProductRoutes r;
  r.int8_prompt_max_tokens = 48;
  r.int8_rows = "AVX2";
  const FormatChoice f = resolve_formats(gguf_blocks(QuantType::Q5_0), {}, MatmulPrecision::automatic, r);
  EXPECT_EQ(f.prefill_products, "f32");
  EXPECT_EQ(f.int8_prompt_max_tokens, 48);
  EXPECT_EQ(f.int8_rows, "AVX2");
  EXPECT_TRUE(has(f.products_reason, "AVX2 integer rows up to 48 tokens")) << f.products_reason;
  EXPECT_TRUE(has(f.products_reason, "then widened to f32")) << f.products_reason;
  r.bf16_tiles = true;
  EXPECT_EQ(resolve_formats(gguf_blocks(QuantType::Q5_0), {}, MatmulPrecision::automatic, r).prefill_products, "bf16");
}

// No rows (AMX, the portable rows) or no blocks (a dense checkpoint, f32 products asked for): nothing on the rows.
TEST(FormatChoiceRoutes, NoRowsOrNoBlocksSayNothingOfThem) {
  ProductRoutes r;
  r.bf16_tiles = true;
  const FormatChoice amx = resolve_formats(gguf_blocks(QuantType::Q4_K), {}, MatmulPrecision::automatic, r);
  EXPECT_EQ(amx.prefill_products, "bf16");
  EXPECT_EQ(amx.int8_prompt_max_tokens, 0);
  EXPECT_EQ(amx.int8_rows, "");
  EXPECT_FALSE(has(amx.products_reason, "integer rows")) << amx.products_reason;
  r.int8_prompt_max_tokens = kPromptInt8EveryLength;
  CheckpointFormats dense;
  dense.dense = DType::bf16;
  const FormatChoice d = resolve_formats(dense, {}, MatmulPrecision::automatic, r);
  EXPECT_EQ(d.prefill_products, "bf16");
  EXPECT_EQ(d.int8_prompt_max_tokens, 0);
  const FormatChoice exact = resolve_formats(gguf_blocks(QuantType::Q4_0), {}, MatmulPrecision::highest, r);
  EXPECT_EQ(exact.prefill_products, "f32");
}

}  // namespace
}  // namespace attnzoo
