#pragma once
// Host side of the chunked launches (delta_chunk.cu, gla_chunk.cu): both run three kernels of kThreads threads
// on one Params, each with its own dynamic shared memory, under the device's opt-in limit.
#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"

namespace attnzoo::cuda_delta_chunk {

template <class Kernel, class KernelParams>
void launch_pass(Kernel kernel, unsigned grid, size_t smem, cudaStream_t stream, const KernelParams& p,
                 const char* name) {
  if (grid == 0) return;  // no chunks (only empty sequences): the state pass alone copies the states
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
             "cudaFuncSetAttribute");
  kernel<<<grid, kThreads, smem, stream>>>(p);
  cuda_check(cudaGetLastError(), name);
}

// The most dynamic shared memory one block of the current device may opt into.
inline int shared_memory_optin() {
  int device = 0, optin = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute");
  return optin;
}

}  // namespace attnzoo::cuda_delta_chunk
