#include "core/utf8.h"

#include <gtest/gtest.h>

namespace attnzoo {
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

}  // namespace
}  // namespace attnzoo
