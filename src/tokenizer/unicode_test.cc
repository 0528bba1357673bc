#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace attnzoo::tok {
namespace {

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
