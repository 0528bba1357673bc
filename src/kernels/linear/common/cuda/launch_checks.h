#pragma once
// What every linear-family CUDA launcher refuses on the host, before the GPU is touched: data not aligned to
// its element (the kernels load whole bf16 / f16 / f32 elements, which must be naturally aligned) and grids past
// the one-dimensional limit. Plain C++: the launch plans (.cc) and the launchers (.cu) share it.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace attnzoo::cuda_linear {

inline void require_aligned(const void* data, size_t bytes, const char* name) {
  require(reinterpret_cast<uintptr_t>(data) % bytes == 0, name, [&] {
    return "data must be aligned to its element size (" + std::to_string(bytes) + " bytes) on CUDA";
  });
}

// `ctas` thread blocks on a one-dimensional grid, counted as `how` says (e.g. "sequences x heads x ceil(P / 16)").
inline void require_grid_fits(int64_t ctas, const char* name, const char* how) {
  require(ctas <= INT_MAX, name, [&] {
    return std::string(how) + " = " + std::to_string(ctas) + " thread blocks exceed the grid's 2^31 - 1";
  });
}

}  // namespace attnzoo::cuda_linear
