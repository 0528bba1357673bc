// The head-row copy launcher (head_rows_cuda.h); the kernel's body is head_rows_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/head_rows_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

__global__ void __launch_bounds__(kHeadRowThreads) head_rows_kernel(const HeadRowParams p) { copy_head_rows(p); }

}  // namespace
}  // namespace cuda_step

void copy_head_rows_cuda(const HeadRowCopy& c, Stream stream) {
  using namespace cuda_step;
  check_head_rows_cuda(c);
  const HeadRowParams p = head_row_params(c);
  if (p.rows == 0 || p.heads * p.width == 0) return;
  const dim3 grid(grid_for(p.heads * p.width, kHeadRowThreads), grid_rows(p.rows));
  const DeviceGuard on(c.src.device);
  head_rows_kernel<<<grid, kHeadRowThreads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "head_rows_kernel launch");
}

}  // namespace attnzoo
