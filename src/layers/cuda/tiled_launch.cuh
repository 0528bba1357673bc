#pragma once
// Launching a tiled GEMM kernel (gemm.cu's, moe.cu's grouped one) on its plan's grid: the tile's dynamic shared
// memory (gemm_plan.h's kSmemBytes, its stages of A and B panels) can pass the 48 KiB a kernel gets without opting
// in, so every launch first raises the kernel's limit. Only the .cu launchers include this.
#include <cuda_runtime.h>

#include "core/cuda_check.h"

namespace attnzoo {
namespace cuda_gemm {

// `l`: a plan with grid_m, grid_n and the kernel's params; `what` names the kernel in a launch error.
template <class Tile, class Launch, class Params>
void launch_tiled(void (*kernel)(Params), const Launch& l, cudaStream_t stream, const char* what) {
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Tile::kSmemBytes)),
             "cudaFuncSetAttribute");
  kernel<<<dim3(l.grid_m, l.grid_n), Tile::kThreads, Tile::kSmemBytes, stream>>>(l.params);
  cuda_check(cudaGetLastError(), what);
}

}  // namespace cuda_gemm
}  // namespace attnzoo
