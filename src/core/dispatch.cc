#include "core/dispatch.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/amx.h"
#include "core/bf16_dot.h"
#include "core/error.h"

namespace attnzoo {
namespace {

int64_t hwy_bits(Target t) {
  switch (t) {
    // Highway 1.0 builds HWY_SCALAR as its portable fallback, later versions HWY_EMU128.
    case Target::scalar: return (HWY_TARGETS & HWY_EMU128) ? HWY_EMU128 : HWY_SCALAR;
    case Target::avx2: return HWY_AVX2;
    case Target::avx512:
    case Target::avx512_bf16: return HWY_AVX3;
  }
  return 0;
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

std::atomic<int> g_active{-1};
std::mutex g_mutex;

}  // namespace

const char* target_name(Target t) {
  switch (t) {
    case Target::scalar: return "scalar";
    case Target::avx2: return "avx2";
    case Target::avx512: return "avx512";
    case Target::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

std::vector<Target> supported_targets() {
  // Computed once, before anything narrows Highway's mask (SupportedTargets() honours a narrowing).
  static const std::vector<Target> targets = [] {
    const int64_t hw = hwy::SupportedTargets() & HWY_TARGETS;
    std::vector<Target> out;
    if ((hw & HWY_AVX3) && cpu_has_avx512_bf16()) out.push_back(Target::avx512_bf16);
    for (Target t : {Target::avx512, Target::avx2, Target::scalar})
      if (hw & hwy_bits(t)) out.push_back(t);
    return out;
  }();
  return targets;
}

void set_target(Target t) {
  const std::vector<Target>& supported = supported_targets();
  std::lock_guard<std::mutex> lock(g_mutex);
  bool ok = false;
  for (Target s : supported) ok |= (s == t);
  if (!ok) throw ArgumentError(std::string("target: '") + target_name(t) + "' is not supported by this CPU or build");
  hwy::SetSupportedTargetsForTest(hwy_bits(t));
  g_active.store(int(t));
}

void set_target(const std::string& name) {
  for (Target t : {Target::scalar, Target::avx2, Target::avx512, Target::avx512_bf16})
    if (name == target_name(t)) return set_target(t);
  throw ArgumentError("target: unknown target '" + name + "' (expected scalar, avx2, avx512 or avx512_bf16)");
}

Target active_target() {
  int v = g_active.load();
  if (v >= 0) return Target(v);
  const char* env = std::getenv("ATTNZOO_TARGET");
  if (env && *env) {
    std::string name(env);
    try {
      set_target(name);
    } catch (const ArgumentError& e) {
      throw ArgumentError(std::string("ATTNZOO_TARGET: ") + e.what());
    }
  } else {
    set_target(supported_targets().front());
  }
  return Target(g_active.load());
}

bool bf16_dot_available() { return active_target() == Target::avx512_bf16; }

std::string cpuid_vendor() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return "";
  char v[13] = {};
  std::memcpy(v, &ebx, 4);  // the vendor string is EBX, EDX, ECX in that order
  std::memcpy(v + 4, &edx, 4);
  std::memcpy(v + 8, &ecx, 4);
  return v;
#else
  return "";
#endif
}

Bf16DotPreference bf16_dot_preference(const std::string& vendor, const char* env) {
  if (env && *env) {
    const std::string v(env);
    if (v == "1") return {true, "ATTNZOO_BF16_DOT=1"};
    if (v == "0") return {false, "ATTNZOO_BF16_DOT=0"};
    throw ArgumentError("ATTNZOO_BF16_DOT: expected 0 or 1, got '" + v + "'");
  }
  if (vendor == "GenuineIntel")
    return {false, "Intel: vdpbf16ps measured slower than widening to f32; ATTNZOO_BF16_DOT=1 to use it"};
  if (vendor == "AuthenticAMD") return {true, "AMD: vdpbf16ps measured faster; ATTNZOO_BF16_DOT=0 to widen"};
  return {true, "vendor '" + vendor + "' unmeasured, vdpbf16ps kept; ATTNZOO_BF16_DOT=0 to widen"};
}

const Bf16DotPreference& bf16_dot_preferred() {
  static const Bf16DotPreference preferred = bf16_dot_preference(cpuid_vendor(), std::getenv("ATTNZOO_BF16_DOT"));
  return preferred;
}

bool bf16_dot_enabled() {
  // The preference first, so a bad ATTNZOO_BF16_DOT is reported on every CPU, not only where it would matter.
  const bool preferred = bf16_dot_preferred().use;
  return preferred && bf16_dot_available();
}

bool bf16_tiles_enabled() { return amx_bf16_enabled() || bf16_dot_enabled(); }

const char* bf16_tiles_engine() {
  if (amx_bf16_enabled()) return "AMX tiles";  // bf16_pair_gemm's own choice, in the same order
  return bf16_dot_enabled() ? "vdpbf16ps" : nullptr;
}

bool vnni_int8_enabled() {
  static const bool cpu = cpu_has_avx512_vnni();
  const Target t = active_target();
  return cpu && (t == Target::avx512 || t == Target::avx512_bf16);
}

}  // namespace attnzoo
