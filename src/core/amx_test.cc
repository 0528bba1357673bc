#include "core/amx.h"

#include <gtest/gtest.h>

#include "core/dispatch.h"
#include "core/error.h"

namespace attnzoo {
namespace {

TEST(Amx, RuleNeedsCpuOsAndGrant) {
  EXPECT_TRUE(amx_rule(true, true, true, nullptr).use);
  EXPECT_TRUE(amx_rule(true, true, true, "").use);
  EXPECT_TRUE(amx_rule(true, true, true, "1").use);
  EXPECT_FALSE(amx_rule(false, true, true, nullptr).use);
  EXPECT_FALSE(amx_rule(true, false, true, nullptr).use);
  EXPECT_FALSE(amx_rule(true, true, false, "1").use);
  const AmxSupport off = amx_rule(true, true, true, "0");
  EXPECT_FALSE(off.use);
  EXPECT_NE(off.reason.find("ATTNZOO_AMX=0"), std::string::npos);
  EXPECT_NE(amx_rule(true, false, false, nullptr).reason.find("XCR0"), std::string::npos);
  EXPECT_NE(amx_rule(true, true, false, nullptr).reason.find("arch_prctl"), std::string::npos);
}

TEST(Amx, BadEnvironmentValueNamesTheVariable) {
  for (bool cpu : {false, true}) {
    try {
      amx_rule(cpu, true, true, "yes");
      FAIL() << "expected ArgumentError";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("ATTNZOO_AMX"), std::string::npos) << e.what();
    }
  }
}

TEST(Amx, OffUnderANarrowerTarget) {
  const Target saved = active_target();
  for (Target t : supported_targets()) {
    if (t == Target::avx512_bf16) continue;
    set_target(t);
    EXPECT_FALSE(amx_bf16_enabled()) << target_name(t);
  }
  set_target(saved);
  // The process's own answer is stable and explained.
  EXPECT_FALSE(amx_support().reason.empty());
  EXPECT_EQ(amx_support().use, amx_support().use);
}

TEST(Amx, TileConfigLayout) {
  AmxTileConfig cfg;
  cfg.set(3, 16, 64);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&cfg);
  EXPECT_EQ(bytes[0], 1);                  // palette
  EXPECT_EQ(bytes[16 + 2 * 3], 64);        // bytes per row of tile 3, little-endian
  EXPECT_EQ(bytes[48 + 3], 16);            // rows of tile 3
}

}  // namespace
}  // namespace attnzoo
