// The prompt route's rule per CPU class (pure: every class is checked on any machine), the engine this CPU and
// target run, and the ATTNZOO_PROMPT_INT8 setting over both.
#include "layers/prompt_int8_route.h"

#include <gtest/gtest.h>

#include "core/amx.h"
#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

constexpr int64_t kAll = kPromptInt8EveryLength;

// AMX tiles: the panels for every format, whatever rows exist.
TEST(PromptInt8Route, AmxKeepsThePanels) {
  for (Int8RowsEngine e : {Int8RowsEngine::vnni, Int8RowsEngine::avx2, Int8RowsEngine::portable})
    for (QuantType t : {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K})
      EXPECT_EQ(prompt_int8_auto_max_tokens(e, t, /*amx_bf16=*/true, /*bf16_panels=*/true), 0)
          << int8_rows_engine_name(e) << " " << quant_type_name(t);
}

// AVX-512 VNNI without AMX (Zen 4, Intel Xeons before Sapphire Rapids): the VNNI rows at every length, against
// bf16 panels (AVX-512-BF16) and f32 ones alike, but Q6_K against bf16 panels only for short prompts.
TEST(PromptInt8Route, VnniRowsTakeEveryLengthButQ6kAgainstBf16Panels) {
  for (bool bf16 : {false, true})
    for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,
                        QuantType::IQ4_XS})
      EXPECT_EQ(prompt_int8_auto_max_tokens(Int8RowsEngine::vnni, t, false, bf16), kAll) << quant_type_name(t);
  EXPECT_EQ(prompt_int8_auto_max_tokens(Int8RowsEngine::vnni, QuantType::Q6_K, false, false), kAll);
  EXPECT_EQ(prompt_int8_auto_max_tokens(Int8RowsEngine::vnni, QuantType::Q6_K, false, true), 48);
}

// The AVX2 rows (AVX2 CPUs, AVX-512 ones without VNNI; Q5_0 / Q5_1 on every x86 CPU): every length for the 4-,
// 6- and 8-bit formats and Q5_K, short prompts only for Q5_0 / Q5_1, shorter still against bf16 panels.
TEST(PromptInt8Route, Avx2RowsTakeEveryLengthButQ5GgufRowsOnlyShortPrompts) {
  for (bool bf16 : {false, true}) {
    for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,
                        QuantType::Q6_K, QuantType::IQ4_XS})
      EXPECT_EQ(prompt_int8_auto_max_tokens(Int8RowsEngine::avx2, t, false, bf16), kAll) << quant_type_name(t);
    for (QuantType t : {QuantType::Q5_0, QuantType::Q5_1}) {
      const int64_t max = prompt_int8_auto_max_tokens(Int8RowsEngine::avx2, t, false, bf16);
      EXPECT_EQ(max, bf16 ? 32 : 48) << quant_type_name(t);
      EXPECT_GT(max, 8) << "a prompt too short for the panels must take the rows";
    }
  }
}

// The portable int16 rows (scalar target, IQ4 rows not regrouped) and formats without integer rows: the panels.
TEST(PromptInt8Route, PortableRowsAndFormatsWithoutIntegerRowsKeepThePanels) {
  for (bool bf16 : {false, true})
    for (QuantType t : {QuantType::Q4_0, QuantType::Q8_0, QuantType::IQ4_XS}) {
      EXPECT_EQ(prompt_int8_auto_max_tokens(Int8RowsEngine::portable, t, false, bf16), 0) << quant_type_name(t);
      EXPECT_EQ(prompt_int8_auto_max_tokens(Int8RowsEngine::none, t, false, bf16), 0) << quant_type_name(t);
    }
}

// The engine follows quant_gemv's own choice on each target; the setting wraps the rule: "on" every length of
// every format with integer rows, "off" none, "auto" the rule of this CPU and target.
TEST(PromptInt8Route, EngineAndSettingOnEveryTarget) {
  const PromptInt8Rows saved = linear_prompt_int8_rows();
  testing::for_each_target([](Target target) {
    const Int8RowsEngine q4 = prompt_int8_rows_engine(QuantType::Q4_0);
    if (target == Target::scalar)
      EXPECT_EQ(q4, Int8RowsEngine::portable);
    else
      EXPECT_EQ(q4, quant_gemv_vnni_enabled() ? Int8RowsEngine::vnni : Int8RowsEngine::avx2) << target_name(target);
    // Q5_0 has AVX2 rows only, VNNI CPU or not; IQ4_XS's AVX2 rows are the regrouped ones.
    EXPECT_EQ(prompt_int8_rows_engine(QuantType::Q5_0),
              target == Target::scalar ? Int8RowsEngine::portable : Int8RowsEngine::avx2);
    if (!quant_gemv_vnni_enabled() && target != Target::scalar)
      EXPECT_EQ(prompt_int8_rows_engine(QuantType::IQ4_XS, /*regrouped=*/false), Int8RowsEngine::portable);
    EXPECT_EQ(prompt_int8_rows_engine(QuantType::F32), Int8RowsEngine::none);
    for (QuantType t : {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q6_K}) {
      set_linear_prompt_int8_rows(PromptInt8Rows::on);
      EXPECT_EQ(linear_prompt_int8_max_tokens(t), kAll);
      set_linear_prompt_int8_rows(PromptInt8Rows::off);
      EXPECT_EQ(linear_prompt_int8_max_tokens(t), 0);
      EXPECT_FALSE(linear_prompt_takes_int8_rows(t, 9));
      set_linear_prompt_int8_rows(PromptInt8Rows::automatic);
      const int64_t want = prompt_int8_auto_max_tokens(prompt_int8_rows_engine(t), t, amx_bf16_enabled(),
                                                       bf16_tiles_enabled());
      EXPECT_EQ(linear_prompt_int8_max_tokens(t), want) << quant_type_name(t) << " on " << target_name(target);
      EXPECT_EQ(linear_prompt_takes_int8_rows(t, 33), 33 <= want) << quant_type_name(t);
    }
    set_linear_prompt_int8_rows(PromptInt8Rows::on);
    EXPECT_EQ(linear_prompt_int8_max_tokens(QuantType::F32), 0) << "no integer rows: never";
  });
  set_linear_prompt_int8_rows(saved);
}

}  // namespace
}  // namespace attnzoo
