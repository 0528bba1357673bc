#pragma once
// Whether OpenBLAS's f32 kernels lag the active target, said to a reader. A DYNAMIC_ARCH OpenBLAS picks its
// kernels once, when it is loaded, from the CPU or from OPENBLAS_CORETYPE (layers/blas_core.h, which also
// corrects a fallback to old kernels); an environment that pins an older core (Haswell on an AVX-512 machine)
// halves every f32 projection GEMM while the kernels of attnzoo's own target run at full width. `attnzoo info`
// and the kernel table print the core and say so when it lags the active target.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "layers/blas_core.h"

namespace attnzoo::bench {

// Empty, or one sentence for when the BLAS core's class is narrower than `target`'s; `coretype_env` is
// OPENBLAS_CORETYPE (nullptr when unset), named in the sentence as the cause when it is set.
std::string blas_class_note(std::string_view core, Target target, const char* coretype_env);

// Empty, or one sentence for when attnzoo switched OpenBLAS off the core it detected (configure_blas).
std::string blas_choice_note(const BlasCoreChoice& choice);

// What holds torch (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS) and OpenBLAS (OPENBLAS_CORETYPE) to `target`'s
// class when dispatch was forced below `best`, the widest target the CPU runs: `attnzoo --target avx2 bench
// kernels` then compares with peers of the imitated class. Empty when nothing was forced lower.
std::vector<std::pair<std::string, std::string>> class_environment(Target target, Target best);

}  // namespace attnzoo::bench
