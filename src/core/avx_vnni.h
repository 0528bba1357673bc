#pragma once
// AVX-VNNI: vpdpbusd (four u8 x s8 products summed into each i32 lane) in its VEX encoding, on 256-bit registers,
// for CPUs that have it without AVX-512: Intel's Alder Lake, Raptor Lake, Meteor / Arrow / Lunar Lake and Sierra
// Forest, and every AVX-512 VNNI Xeon from Sapphire Rapids on. Where the AVX2 regrouped rows run
// (gemv_groups_avx2.cc) it forms a slice's lane sums in one instruction instead of vpmaddubsw + vpmaddwd.
#include <string>

namespace attnzoo {

struct AvxVnniSupport {
  bool use = false;
  bool cpu = false;    // the CPU has it (use is false with cpu true when ATTNZOO_AVX_VNNI=0 turned it off)
  std::string reason;  // for `attnzoo info`
};

// The rule, pure. `cpu`: CPUID leaf 7 subleaf 1 says AVX-VNNI (its VEX state is the AVX state every AVX2 target
// already needs from the OS); `env`: ATTNZOO_AVX_VNNI's value (null or empty when unset): "0" turns it off, "1" or
// unset uses it where the CPU has it. Throws ArgumentError naming ATTNZOO_AVX_VNNI for another value.
AvxVnniSupport avx_vnni_rule(bool cpu, const char* env);
// The rule for this process (CPUID and the environment), decided on first use and kept.
const AvxVnniSupport& avx_vnni_support();

}  // namespace attnzoo
