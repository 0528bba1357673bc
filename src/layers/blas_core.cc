#include "layers/blas_core.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <utility>

// OpenBLAS's core selection in a DYNAMIC_ARCH build (driver/others/dynamic.c, exported since 0.2 and still in
// 0.3.31): quit forgets the core, init picks one again, from OPENBLAS_CORETYPE when set. Weak, so that a library
// without them (a build for one core) links, and attnzoo keeps its core.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace attnzoo {

BlasKernel blas_kernel() {
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  return {config ? config : "", core ? core : ""};
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

// True when quit / init are the library that openblas_get_corename reports on: another OpenBLAS in the process
// (loaded by some other module with global symbols) must not be switched in its place.
bool selection_is_ours() {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return false;
  Dl_info init{}, quit{}, corename{};
  if (!dladdr(reinterpret_cast<void*>(&gotoblas_dynamic_init), &init) ||
      !dladdr(reinterpret_cast<void*>(&gotoblas_dynamic_quit), &quit) ||
      !dladdr(reinterpret_cast<void*>(&openblas_get_corename), &corename))
    return false;
  return init.dli_fbase == corename.dli_fbase && quit.dli_fbase == corename.dli_fbase;
}

// Re-runs OpenBLAS's core selection with OPENBLAS_CORETYPE=`core`, then restores the variable (unset or empty, as
// blas_core_to_force found it): children that load their own OpenBLAS choose for themselves.
void reselect_core(const std::string& core, const char* coretype_env) {
  const bool was_set_empty = coretype_env != nullptr;  // blas_core_to_force acts on unset or empty alone
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (was_set_empty)
    setenv("OPENBLAS_CORETYPE", "", 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace

std::optional<Target> blas_core_class(std::string_view core) {
  static const std::pair<const char*, Target> kCores[] = {
      {"skylakex", Target::avx512}, {"cooperlake", Target::avx512}, {"sapphirerapids", Target::avx512},
      {"haswell", Target::avx2},    {"zen", Target::avx2},          {"sandybridge", Target::scalar},
      {"bulldozer", Target::scalar}, {"piledriver", Target::scalar}, {"steamroller", Target::scalar},
      {"excavator", Target::scalar}, {"nehalem", Target::scalar},   {"core2", Target::scalar},
      {"penryn", Target::scalar},   {"dunnington", Target::scalar}, {"prescott", Target::scalar},
      {"atom", Target::scalar},     {"barcelona", Target::scalar},  {"opteron", Target::scalar},
  };
  const std::string name = lower(core);
  for (const auto& [known, cls] : kCores)
    if (name == known) return cls;
  return std::nullopt;
}

std::optional<std::string> blas_core_to_force(std::string_view core, Target target, const char* coretype_env,
                                              std::string_view config) {
  if (coretype_env && *coretype_env) return std::nullopt;  // the user's choice, whatever it is
  if (config.find("DYNAMIC_ARCH") == std::string_view::npos) return std::nullopt;
  if (blas_core_class(core) != Target::scalar) return std::nullopt;  // a wide core, or a name we do not know
  const std::string name = lower(core);
  for (const char* amd : {"bulldozer", "piledriver", "steamroller", "excavator"})
    if (name == amd) return std::nullopt;
  switch (target) {
    case Target::scalar: return std::nullopt;
    case Target::avx2: return "Haswell";
    case Target::avx512:
    case Target::avx512_bf16: return "SkylakeX";
  }
  return std::nullopt;
}

const BlasCoreChoice& configure_blas() {
  static BlasCoreChoice choice;
  static std::once_flag once;
  std::call_once(once, [] {
    const BlasKernel before = blas_kernel();
    const char* coretype_env = std::getenv("OPENBLAS_CORETYPE");
    choice.detected = before.core;
    choice.target = active_target();
    if (const std::optional<std::string> core = blas_core_to_force(before.core, choice.target, coretype_env,
                                                                   before.config);
        core && selection_is_ours()) {
      reselect_core(*core, coretype_env);
      // What OpenBLAS took: a build without that core picks another one, or the one it had.
      if (std::string now = blas_kernel().core; now != before.core) choice.selected = std::move(now);
    }
    openblas_set_num_threads(1);
  });
  return choice;
}

}  // namespace attnzoo
