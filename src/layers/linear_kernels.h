#pragma once
// Per-target pieces of Linear (linear_kernels.cc); call active_target() once before using them.
#include <cstddef>

#include "core/dtype.h"

namespace attnzoo {

struct GemvTask {
  const void* w;  // [N, K] f32 or bf16
  DType w_dtype;
  size_t K;
  const float* x;  // [T, K]
  size_t T;        // 1..8
  size_t n0, n1;   // output rows of this task
  const float* bias;
  float* y;  // [T, ldy]
  size_t ldy;
};

struct GemmPanelTask {
  const void* w;
  DType w_dtype;
  size_t K;
  const float* x;  // [M, K]
  size_t M;
  size_t n0, n1;
  const float* bias;
  float* y;
  size_t ldy;
};

void gemv_rows(const GemvTask& task);
void tile_gemm_panel(const GemmPanelTask& task);

}  // namespace attnzoo
