#include "core/bf16_dot.h"
#include "core/dispatch.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/cpu_info.h"
#include "core/error.h"

namespace attnzoo {
namespace {

// Emerald Rapids runs vdpbf16ps at half its f32 FMA rate, Zen 4 / Zen 5 at twice it: the default follows the vendor.
TEST(Bf16DotRule, ByVendorWhenUnset) {
  EXPECT_FALSE(bf16_dot_preference("GenuineIntel", nullptr).use);
  EXPECT_FALSE(bf16_dot_preference("GenuineIntel", "").use);
  EXPECT_TRUE(bf16_dot_preference("AuthenticAMD", nullptr).use);
  EXPECT_TRUE(bf16_dot_preference("HygonGenuine", nullptr).use);
  EXPECT_TRUE(bf16_dot_preference("", nullptr).use);
  EXPECT_NE(bf16_dot_preference("GenuineIntel", nullptr).reason.find("ATTNZOO_BF16_DOT=1"), std::string::npos);
}

TEST(Bf16DotRule, EnvironmentOverridesBothWays) {
  EXPECT_TRUE(bf16_dot_preference("GenuineIntel", "1").use);
  EXPECT_FALSE(bf16_dot_preference("AuthenticAMD", "0").use);
  EXPECT_FALSE(bf16_dot_preference("", "0").use);
  EXPECT_EQ(bf16_dot_preference("AuthenticAMD", "0").reason, "ATTNZOO_BF16_DOT=0");
}

TEST(Bf16DotRule, BadValueNamesTheVariable) {
  for (const char* bad : {"yes", "2", "true", " 1"}) {
    try {
      bf16_dot_preference("GenuineIntel", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("ATTNZOO_BF16_DOT"), std::string::npos) << e.what();
    }
  }
}

// /proc/cpuinfo's vendor_id is CPUID leaf 0's string: the two readings must agree where both exist.
TEST(Bf16DotRule, CpuidVendorMatchesCpuinfo) {
  const CpuInfo cpu = read_cpu_info();
  if (cpu.vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo";
  EXPECT_EQ(cpuid_vendor(), cpu.vendor);
}

// The test binaries turn vdpbf16ps on (src/testing/bf16_dot_env.cc) so its kernels stay tested on Intel too.
TEST(Bf16DotRule, TestsRunTheBf16KernelsWhereTheCpuHasThem) {
  ASSERT_NE(std::getenv("ATTNZOO_BF16_DOT"), nullptr);
  EXPECT_EQ(bf16_dot_enabled(), bf16_dot_available() && bf16_dot_preferred().use);
  if (std::string(std::getenv("ATTNZOO_BF16_DOT")) == "1") EXPECT_EQ(bf16_dot_enabled(), bf16_dot_available());
}

}  // namespace
}  // namespace attnzoo
