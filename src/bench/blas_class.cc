#include "bench/blas_class.h"

#include <utility>

namespace attnzoo::bench {

namespace {

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

std::string blas_class_note(std::string_view core, Target target, const char* coretype_env) {
  const std::optional<Target> cls = blas_core_class(core);
  if (!cls || width_rank(*cls) >= width_rank(target)) return "";
  std::string note = "OpenBLAS runs its " + std::string(core) + " kernels, narrower than the active " +
                     target_name(target) + " target: f32 GEMMs (prefill projections) run below this CPU's peak";
  if (coretype_env && *coretype_env)
    note += " because OPENBLAS_CORETYPE=" + std::string(coretype_env) + " is set (unset it to let OpenBLAS choose)";
  return note;
}

std::string blas_choice_note(const BlasCoreChoice& choice) {
  if (choice.selected.empty()) return "";
  return "OpenBLAS detected " + choice.detected + " (its fallback for a CPU it does not know); attnzoo selected " +
         choice.selected + " for the " + target_name(choice.target) +
         " target (set OPENBLAS_CORETYPE to choose the core yourself)";
}

std::vector<std::pair<std::string, std::string>> class_environment(Target target, Target best) {
  if (width_rank(target) >= width_rank(best)) return {};  // AVX-512 below AVX-512-BF16: the same f32 kernels
  if (target == Target::avx2)
    return {{"ATEN_CPU_CAPABILITY", "avx2"}, {"MKL_ENABLE_INSTRUCTIONS", "AVX2"}, {"OPENBLAS_CORETYPE", "Haswell"}};
  return {{"ATEN_CPU_CAPABILITY", "default"}, {"MKL_ENABLE_INSTRUCTIONS", "SSE4_2"}, {"OPENBLAS_CORETYPE", "Nehalem"}};
}

}  // namespace attnzoo::bench
