#pragma once
// Whether bf16 products run on vdpbf16ps or widen bf16 to f32 for FMAs. On an Intel Emerald Rapids vdpbf16ps ran
// at half the f32 FMA rate (every bf16 path faster widened), on AMD Zen 4 / Zen 5 at twice it; so the default
// follows the CPU vendor, fixed per machine (a timing probe could flip from run to run and change outputs), and
// ATTNZOO_BF16_DOT=0|1 overrides it. bf16_dot_enabled() (core/dispatch.h) = available and preferred.
#include <string>

namespace attnzoo {

// True when the avx512_bf16 target is active, so vdpbf16ps can run whatever the preference: the peak probe and a
// GEMM backend named explicitly use it.
bool bf16_dot_available();

struct Bf16DotPreference {
  bool use = true;
  std::string reason;  // for `attnzoo info`
};
// The rule, pure: `env` (ATTNZOO_BF16_DOT's value; null or empty when unset) "1" or "0" decides; unset, not on
// "GenuineIntel", yes on "AuthenticAMD" and any other vendor. Throws ArgumentError naming ATTNZOO_BF16_DOT for
// another value.
Bf16DotPreference bf16_dot_preference(const std::string& vendor, const char* env);
// The rule for this process's CPU and environment, computed on first use and kept.
const Bf16DotPreference& bf16_dot_preferred();
// CPUID leaf 0's vendor string ("GenuineIntel", "AuthenticAMD"), or "" off x86.
std::string cpuid_vendor();

}  // namespace attnzoo
