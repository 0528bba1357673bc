// Linked into every C++ test binary. On Intel CPUs the default rule (core/dispatch.h) widens bf16 to f32 instead
// of running vdpbf16ps, so an Intel CI machine would stop testing the AVX-512-BF16 tile kernels; the tests turn
// them on wherever the CPU has them unless the caller set ATTNZOO_BF16_DOT. A static initializer covers ctest and
// a binary run by hand alike; the preference is read on first use, after every initializer has run.
#include <cstdlib>

namespace {
[[maybe_unused]] const bool bf16_dot_env_set = [] { return setenv("ATTNZOO_BF16_DOT", "1", /*overwrite=*/0) == 0; }();
}  // namespace
