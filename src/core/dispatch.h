#pragma once
// Which SIMD path runs. Highway compiles every kernel once per target; we pick one at run time.
// ATTNZOO_TARGET=scalar|avx2|avx512|avx512_bf16 forces a path (tests walk all of them).
#include <string>
#include <vector>

namespace attnzoo {

enum class Target { scalar, avx2, avx512, avx512_bf16 };

const char* target_name(Target t);
// Targets this CPU can run and this binary contains, best first.
std::vector<Target> supported_targets();
// The target kernels use now (first call applies ATTNZOO_TARGET, else the best supported).
Target active_target();
// Forces a target; throws ArgumentError if this CPU or binary cannot run it.
void set_target(Target t);
void set_target(const std::string& name);
// True when the hand-written AVX-512-BF16 tile kernels may run (bf16 inputs use vdpbf16ps).
bool bf16_dot_enabled();
// True when bf16_pair_gemm (kernels/common/bf16_dot.h) may run and is the faster way to multiply bf16: on AMX
// tiles (amx_bf16_enabled(), core/amx.h) or on vdpbf16ps where bf16_dot_enabled(). Callers that choose between
// bf16 products and widening to f32 ask this.
bool bf16_tiles_enabled();
// Which engine multiplies the bf16 products that callers asking bf16_tiles_enabled() choose: "AMX tiles",
// "vdpbf16ps", or nullptr where they widen to f32 (for `attnzoo info`, the products report and tests).
const char* bf16_tiles_engine();
// True when the AVX-512-VNNI int8 kernels may run: the CPU has VNNI (with BW, VL, DQ) and an AVX-512 target is
// active, so forcing a narrower target turns them off like every other hand-written path.
bool vnni_int8_enabled();

}  // namespace attnzoo
