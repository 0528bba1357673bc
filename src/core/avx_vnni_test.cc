#include "core/avx_vnni.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

TEST(AvxVnni, RuleNeedsTheCpuAndHonoursTheSwitch) {
  EXPECT_TRUE(avx_vnni_rule(true, nullptr).use);
  EXPECT_TRUE(avx_vnni_rule(true, "").use);
  EXPECT_TRUE(avx_vnni_rule(true, "1").use);
  EXPECT_FALSE(avx_vnni_rule(false, nullptr).use);
  EXPECT_FALSE(avx_vnni_rule(false, "1").use);
  const AvxVnniSupport off = avx_vnni_rule(true, "0");
  EXPECT_FALSE(off.use);
  EXPECT_TRUE(off.cpu);  // turned off, not absent: the kernel bench says which
  EXPECT_FALSE(avx_vnni_rule(false, nullptr).cpu);
  EXPECT_TRUE(avx_vnni_rule(true, nullptr).cpu);
  EXPECT_NE(off.reason.find("ATTNZOO_AVX_VNNI=0"), std::string::npos);
  EXPECT_NE(avx_vnni_rule(false, nullptr).reason.find("no AVX-VNNI"), std::string::npos);
}

TEST(AvxVnni, BadEnvironmentValueNamesTheVariable) {
  for (bool cpu : {false, true}) {
    try {
      avx_vnni_rule(cpu, "yes");
      FAIL() << "expected ArgumentError";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("ATTNZOO_AVX_VNNI"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnzoo
