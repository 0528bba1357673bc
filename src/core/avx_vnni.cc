#include "core/avx_vnni.h"

#include <cstdlib>

#include "core/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace attnzoo {
namespace {

bool cpuid_avx_vnni() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return eax & (1u << 4);
#else
  return false;
#endif
}

}  // namespace

AvxVnniSupport avx_vnni_rule(bool cpu, const char* env) {
  const std::string v = env ? env : "";
  if (!v.empty() && v != "0" && v != "1")
    throw ArgumentError("ATTNZOO_AVX_VNNI: expected 0 or 1, got '" + v + "'");
  if (!cpu) return {false, false, "no AVX-VNNI on this CPU"};
  if (v == "0") return {false, true, "ATTNZOO_AVX_VNNI=0"};
  return {true, true, "vpdpbusd (VEX) in the AVX2 regrouped rows; ATTNZOO_AVX_VNNI=0 to turn it off"};
}

const AvxVnniSupport& avx_vnni_support() {
  static const AvxVnniSupport support = avx_vnni_rule(cpuid_avx_vnni(), std::getenv("ATTNZOO_AVX_VNNI"));
  return support;
}

}  // namespace attnzoo
