#include "tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include "core/utf8.h"

namespace attnzoo::tok {
namespace {

TEST(ByteLevel, MappingIsABijectionOverBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  const std::string mapped = byte_level::encode(all);
  EXPECT_TRUE(utf8::is_valid(mapped));
  EXPECT_EQ(byte_level::char_for_byte(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(byte_level::char_for_byte('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_level::char_for_byte('A'), uint32_t('A'));
  std::string back;
  ASSERT_TRUE(byte_level::decode_token(mapped, back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(byte_level::byte_for_char(0x4E00), -1);
  std::string untouched = "x";
  EXPECT_FALSE(byte_level::decode_token("a\xE4\xB8\x80", untouched));  // U+4E00 is not a byte character
  EXPECT_EQ(untouched, "x");
}

}  // namespace
}  // namespace attnzoo::tok
