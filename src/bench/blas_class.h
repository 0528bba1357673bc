#pragma once
// Which SIMD class OpenBLAS's f32 kernels run at. A DYNAMIC_ARCH OpenBLAS picks its kernels once, when it is
// loaded, from the CPU or from OPENBLAS_CORETYPE; an environment that pins an older core (Haswell on an
// AVX-512 machine) halves every f32 projection GEMM while the kernels of attnzoo's own target run at full
// width. `attnzoo info` and the kernel table print the core and say so when it lags the active target.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dispatch.h"

namespace attnzoo::bench {

struct BlasKernel {
  std::string config;  // openblas_get_config()
  std::string core;    // openblas_get_corename(): the kernels in use
};

BlasKernel blas_kernel();

// The widest attnzoo target whose vector width an OpenBLAS x86 core's f32 kernels use: avx512 (SkylakeX,
// Cooperlake, SapphireRapids), avx2 (Haswell, Zen), scalar for the older AVX / SSE cores; nullopt for a name
// this table does not know (another architecture, a newer OpenBLAS's new core).
std::optional<Target> blas_core_class(std::string_view core);

// Empty, or one sentence for when the BLAS core's class is narrower than `target`'s; `coretype_env` is
// OPENBLAS_CORETYPE (nullptr when unset), named in the sentence as the cause when it is set.
std::string blas_class_note(std::string_view core, Target target, const char* coretype_env);

// What holds torch (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS) and OpenBLAS (OPENBLAS_CORETYPE) to `target`'s
// class when dispatch was forced below `best`, the widest target the CPU runs: `attnzoo --target avx2 bench
// kernels` then compares with peers of the imitated class. Empty when nothing was forced lower.
std::vector<std::pair<std::string, std::string>> class_environment(Target target, Target best);

}  // namespace attnzoo::bench
