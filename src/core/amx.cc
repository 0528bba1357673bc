#include "core/amx.h"

#include <cstdlib>

#include "core/dispatch.h"
#include "core/error.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attnzoo {
namespace {

#if defined(__x86_64__) && defined(__linux__)
constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl code: ask for an extended state component
constexpr int kXfeatureTileData = 18;      // XSAVE component 18: the tile registers' data

bool cpuid_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool bf16 = edx & (1u << 22), tile = edx & (1u << 24);
  return bf16 && tile;
}

bool os_enables_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE: xgetbv may run
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const unsigned tilecfg = 1u << 17, tiledata = 1u << 18;
  return (lo & (tilecfg | tiledata)) == (tilecfg | tiledata);
}

bool request_tile_data() { return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0; }
#else
bool cpuid_amx_bf16() { return false; }
bool os_enables_tiles() { return false; }
bool request_tile_data() { return false; }
#endif

}  // namespace

AmxSupport amx_rule(bool cpu, bool os, bool granted, const char* env) {
  const std::string v = env ? env : "";
  if (!v.empty() && v != "0" && v != "1") throw ArgumentError("ATTNZOO_AMX: expected 0 or 1, got '" + v + "'");
  if (!cpu) return {false, "no AMX-BF16 on this CPU"};
  if (v == "0") return {false, "ATTNZOO_AMX=0"};
  if (!os) return {false, "the CPU has AMX-BF16 but the OS does not enable the tile state (XCR0)"};
  if (!granted) return {false, "the CPU has AMX-BF16 but the kernel refused the tile data (arch_prctl)"};
  return {true, "AMX-BF16 tiles; ATTNZOO_AMX=0 to turn them off"};
}

const AmxSupport& amx_support() {
  static const AmxSupport support = [] {
    const char* env = std::getenv("ATTNZOO_AMX");
    const bool cpu = cpuid_amx_bf16(), os = cpu && os_enables_tiles();
    const bool off = env && std::string(env) == "0";
    return amx_rule(cpu, os, os && !off && request_tile_data(), env);
  }();
  return support;
}

bool amx_bf16_enabled() {
  // The rule first, so a bad ATTNZOO_AMX is reported on every CPU, not only where AMX would run.
  const bool use = amx_support().use;
  return use && active_target() == Target::avx512_bf16;
}

}  // namespace attnzoo
