#include "layers/linear_prefill_mode.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

TEST(LinearPrefillMode, DefaultsToChunkedAndRoundTrips) {
  EXPECT_EQ(linear_prefill_mode(), LinearPrefillMode::chunked);
  set_linear_prefill_mode(parse_linear_prefill_mode("recurrent"));
  EXPECT_EQ(linear_prefill_mode(), LinearPrefillMode::recurrent);
  EXPECT_STREQ(linear_prefill_mode_name(linear_prefill_mode()), "recurrent");
  set_linear_prefill_mode(LinearPrefillMode::chunked);
  EXPECT_STREQ(linear_prefill_mode_name(linear_prefill_mode()), "chunked");
}

TEST(LinearPrefillMode, RejectsUnknownNamesNamingTheArgument) {
  try {
    parse_linear_prefill_mode("fast");
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("mode"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fast"), std::string::npos);
  }
}

}  // namespace
}  // namespace attnzoo
