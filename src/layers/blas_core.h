#pragma once
// Which kernels OpenBLAS runs, and the one correction attnzoo makes to its choice. A DYNAMIC_ARCH OpenBLAS picks
// its kernels once, when it is loaded, from the CPU model or from OPENBLAS_CORETYPE. A release older than the CPU
// can land on its SSE3 Prescott kernels: Debian 12's 0.3.21 does not know Emerald Rapids (family 6 model 207),
// and its model table falls through to the Pentium 4 entry; the f32 projection GEMM then runs at a fifth of the
// speed its AVX-512 kernels reach there.
// attnzoo corrects that case alone (blas_core_to_force), once, before its first GEMM (configure_blas).
#include <optional>
#include <string>
#include <string_view>

#include "core/dispatch.h"

namespace attnzoo {

struct BlasKernel {
  std::string config;  // openblas_get_config(): version, build options and the core in use
  std::string core;    // openblas_get_corename(): the kernels in use
};

BlasKernel blas_kernel();

// The widest attnzoo target whose vector width an OpenBLAS x86 core's f32 kernels use: avx512 (SkylakeX,
// Cooperlake, SapphireRapids), avx2 (Haswell, Zen), scalar for the older AVX / SSE cores; nullopt for a name
// this table does not know (another architecture, a newer OpenBLAS's new core).
std::optional<Target> blas_core_class(std::string_view core);

// The core attnzoo makes OpenBLAS run, or nullopt to keep its choice. Only a fallback: `core` is of the scalar
// class while `target` (the active one) is AVX2 or wider, `config` says DYNAMIC_ARCH (a fixed build has no
// other kernels), and `coretype_env` (OPENBLAS_CORETYPE, nullptr when unset) is unset or empty, so no user
// chose the core. Then the target class's core: SkylakeX for AVX-512, Haswell for AVX2. A core OpenBLAS names
// on purpose for the CPU it recognized is never overridden: the wide ones, and AMD's Bulldozer family (Excavator
// runs AVX2 code, yet OpenBLAS gives it its own kernels).
std::optional<std::string> blas_core_to_force(std::string_view core, Target target, const char* coretype_env,
                                              std::string_view config);

struct BlasCoreChoice {
  std::string detected;            // the core OpenBLAS chose itself
  std::string selected;            // the core attnzoo had it switch to; empty when it kept its own
  Target target = Target::scalar;  // the active target the decision was made for
};

// Once per process (later calls return the first answer): OpenBLAS single-threaded (it runs inside attnzoo's
// tasks, its own threads would oversubscribe the cores) and, where blas_core_to_force says so, its core selection
// re-run with OPENBLAS_CORETYPE set for that call alone. Called before the first GEMM, and by what reports it.
const BlasCoreChoice& configure_blas();

}  // namespace attnzoo
