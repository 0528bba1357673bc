#include "bench/blas_class.h"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace attnzoo::bench {

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

// AVX-512 and AVX-512-BF16 read the same f32 kernels: for the f32 GEMM they are one class.
int width_rank(Target t) {
  switch (t) {
    case Target::scalar: return 0;
    case Target::avx2: return 1;
    case Target::avx512:
    case Target::avx512_bf16: return 2;
  }
  return 0;
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

std::string blas_class_note(std::string_view core, Target target, const char* coretype_env) {
  const std::optional<Target> cls = blas_core_class(core);
  if (!cls || width_rank(*cls) >= width_rank(target)) return "";
  std::string note = "OpenBLAS runs its " + std::string(core) + " kernels, narrower than the active " +
                     target_name(target) + " target: f32 GEMMs (prefill projections) run below this CPU's peak";
  if (coretype_env && *coretype_env)
    note += " because OPENBLAS_CORETYPE=" + std::string(coretype_env) + " is set (unset it to let OpenBLAS choose)";
  return note;
}

std::vector<std::pair<std::string, std::string>> class_environment(Target target, Target best) {
  if (width_rank(target) >= width_rank(best)) return {};  // AVX-512 below AVX-512-BF16: the same f32 kernels
  if (target == Target::avx2)
    return {{"ATEN_CPU_CAPABILITY", "avx2"}, {"MKL_ENABLE_INSTRUCTIONS", "AVX2"}, {"OPENBLAS_CORETYPE", "Haswell"}};
  return {{"ATEN_CPU_CAPABILITY", "default"}, {"MKL_ENABLE_INSTRUCTIONS", "SSE4_2"}, {"OPENBLAS_CORETYPE", "Nehalem"}};
}

}  // namespace attnzoo::bench
