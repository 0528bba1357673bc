#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace attnzoo::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, DecodesValidAndRejectsInvalid) {
  uint32_t cp = 0;
  EXPECT_EQ(utf8::decode("\xE2\x82\xAC", 0, &cp), 3u);
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(utf8::decode("\xF0\x9F\x98\x80", 0, &cp), 4u);
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(utf8::decode("\xC0\x80", 0, &cp), 0u);          // overlong
  EXPECT_EQ(utf8::decode("\xED\xA0\x80", 0, &cp), 0u);      // surrogate
  EXPECT_EQ(utf8::decode("\xF4\x90\x80\x80", 0, &cp), 0u);  // past U+10FFFF
  EXPECT_EQ(utf8::decode("\xE2\x82", 0, &cp), 0u);          // truncated
  EXPECT_TRUE(utf8::is_valid("h\xC3\xA9llo"));
  EXPECT_FALSE(utf8::is_valid("h\xC3llo"));
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  // Unicode's recommended practice (and Python's errors="replace"): a truncated valid prefix is one U+FFFD,
  // each byte that cannot start or continue a sequence is its own.
  EXPECT_EQ(utf8::lossy("a\xE2\x82" "b"), "a" + kFffd + "b");
  EXPECT_EQ(utf8::lossy("\xFF\xFE"), kFffd + kFffd);
  EXPECT_EQ(utf8::lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: E0-range check fails at byte 2
  EXPECT_EQ(utf8::lossy("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(utf8::lossy("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
}

TEST(Utf8, IncompleteTailOnlyForSequencesThatCanStillFinish) {
  EXPECT_EQ(utf8::incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("a\xE2"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8::incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("a\xE2\x82\xAC"), 0u);  // complete
  EXPECT_EQ(utf8::incomplete_tail("a\xFF"), 0u);          // can never complete
  EXPECT_EQ(utf8::incomplete_tail("a\xE0\x80"), 0u);      // overlong prefix: already invalid
  EXPECT_EQ(utf8::incomplete_tail("\x82"), 0u);           // lone continuation
}

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

TEST(Unicode, NormalizationForms) {
  using unicode::Form;
  EXPECT_EQ(unicode::normalize("e\xCC\x81", Form::nfc), "\xC3\xA9");  // e + acute -> é
  EXPECT_EQ(unicode::normalize("\xC3\xA9", Form::nfd), "e\xCC\x81");
  // Canonical reordering: dot below (220) sorts before circumflex (230), then composes to U+1EAD.
  EXPECT_EQ(unicode::normalize("a\xCC\x82\xCC\xA3", Form::nfc), "\xE1\xBA\xAD");
  EXPECT_EQ(unicode::normalize("\xE2\x84\xAB", Form::nfc), "\xC3\x85");  // Angstrom sign -> Å (singleton)
  EXPECT_EQ(unicode::normalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", Form::nfc), "\xEA\xB0\x81");  // Hangul
  EXPECT_EQ(unicode::normalize("\xEF\xAC\x81", Form::nfkc), "fi");  // ligature
  EXPECT_EQ(unicode::normalize("\xEF\xAC\x81", Form::nfc), "\xEF\xAC\x81");
  EXPECT_EQ(unicode::normalize("\xCC\x81x", Form::nfc), "\xCC\x81x");  // leading mark stays
  EXPECT_EQ(unicode::lowercase("ABC \xC3\x89 \xC4\xB0"), "abc \xC3\xA9 i\xCC\x87");
}

}  // namespace
}  // namespace attnzoo::tok
