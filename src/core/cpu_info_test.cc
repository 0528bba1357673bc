#include "core/cpu_info.h"

#include <gtest/gtest.h>

namespace attnzoo {
namespace {

CpuInfo cpu(const char* vendor, int family, int model) {
  CpuInfo c;
  c.model = "AMD EPYC";
  c.vendor = vendor;
  c.family = family;
  c.model_number = model;
  c.logical_cpus = 2;
  return c;
}

// Virtual machines show a bare model name; the family / model numbers still tell the generation, which decides
// how fast AVX-512 runs (Zen 4 splits 512-bit operations in two, Zen 5 does not).
TEST(CpuInfo, NamesTheGenerationFromFamilyAndModel) {
  EXPECT_EQ(microarchitecture(cpu("AuthenticAMD", 25, 17)), "Zen 4");   // Genoa
  EXPECT_EQ(microarchitecture(cpu("AuthenticAMD", 25, 0x61)), "Zen 4");  // Raphael
  EXPECT_EQ(microarchitecture(cpu("AuthenticAMD", 25, 1)), "Zen 3");    // Milan
  EXPECT_EQ(microarchitecture(cpu("AuthenticAMD", 26, 2)), "Zen 5");    // Turin
  EXPECT_EQ(microarchitecture(cpu("GenuineIntel", 6, 0x8f)), "Sapphire Rapids");
  EXPECT_EQ(microarchitecture(cpu("GenuineIntel", 6, 0x6a)), "Ice Lake-SP");
  EXPECT_EQ(microarchitecture(cpu("GenuineIntel", 6, 0x01)), "");
  EXPECT_EQ(microarchitecture(cpu("", -1, -1)), "");
}

TEST(CpuInfo, DescriptionCarriesNumbersOnlyWhenKnown) {
  EXPECT_EQ(describe_cpu(cpu("AuthenticAMD", 25, 17)), "AMD EPYC (2 logical CPUs), family 25 model 17: Zen 4");
  EXPECT_EQ(describe_cpu(cpu("GenuineIntel", 6, 1)), "AMD EPYC (2 logical CPUs), family 6 model 1");
  EXPECT_EQ(describe_cpu(cpu("", -1, -1)), "AMD EPYC (2 logical CPUs)");
  const CpuInfo here = read_cpu_info();
  EXPECT_GE(here.logical_cpus, 1);
  EXPECT_EQ(describe_cpu(here).rfind(here.model.empty() ? "unknown CPU" : here.model, 0), 0u);
}

}  // namespace
}  // namespace attnzoo
