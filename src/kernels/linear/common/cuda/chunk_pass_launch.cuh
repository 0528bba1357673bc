#pragma once
// Host side of the chunked launches (delta_chunk.cu, gla_chunk.cu, rwkv7_chunk.cu): each runs its passes, kernels
// of kThreads threads on one Params with their own dynamic shared memory, under the device's opt-in limit. The
// kernels themselves are chunk_pass_kernel's instances, one per (pass, chunk size).
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"

namespace attnzoo::cuda_delta_chunk {

// Every pass is one device function pass(params, dynamic shared memory) that the emulator runs as well
// (testing/cuda_emulation); its kernel is that call alone, so one template serves every pass of every family.
template <class KernelParams, void (*Pass)(const KernelParams&, unsigned char*)>
__global__ void __launch_bounds__(kThreads) chunk_pass_kernel(const KernelParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  Pass(p, smem);
}

// Launches Pass's kernel over `grid` blocks with `smem` bytes of dynamic shared memory; `name` is what a failed
// launch reports.
template <class KernelParams, void (*Pass)(const KernelParams&, unsigned char*)>
void launch_pass(unsigned grid, size_t smem, cudaStream_t stream, const KernelParams& p, const char* name) {
  if (grid == 0) return;  // no chunks (only empty sequences): the state pass alone copies the states
  const auto kernel = chunk_pass_kernel<KernelParams, Pass>;
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

// What every chunked launch does around its passes: refuse by name (`arg`, the problem's `shape` in words) a plan
// whose largest pass needs more shared memory than a block of this device may have, then one stream-ordered
// allocation for the chunk table and the scratch, the table's upload, the scratch bound into the plan, and
// `passes(std::integral_constant<int, C>{})` for the plan's chunk size C (16, 32 or 64). metadata_bytes_of and
// bind_scratch are the plan's family's own (found beside its ChunkLaunch).
template <class Plan, class Passes>
void run_chunk_plan(Plan& plan, size_t smem, const char* arg, const std::string& shape, cudaStream_t stream,
                    Passes&& passes) {
  const int optin = shared_memory_optin();
  require(smem <= size_t(optin), arg, [&] {
    return shape + " with chunk_size " + std::to_string(plan.C) + " need " + std::to_string(smem) +
           " bytes of shared memory per block; this GPU allows " + std::to_string(optin) +
           " (a smaller chunk_size needs less)";
  });
  StreamScratch scratch(plan.scratch_bytes, stream);
  const std::vector<unsigned char> metadata = metadata_bytes_of(plan);
  scratch.upload(metadata.data(), metadata.size());
  bind_scratch(plan, scratch.data());
  switch (plan.C) {
    case 16: passes(std::integral_constant<int, 16>{}); break;
    case 32: passes(std::integral_constant<int, 32>{}); break;
    default: passes(std::integral_constant<int, 64>{}); break;
  }
  scratch.finish();  // ordered after the kernels on the stream
}

}  // namespace attnzoo::cuda_delta_chunk
