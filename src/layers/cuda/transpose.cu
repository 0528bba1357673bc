// The transpose launcher (transpose_cuda.h); the kernel's body is transpose_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/cuda/transpose_cuda.h"
#include "layers/cuda/transpose_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

__global__ void __launch_bounds__(kTransposeThreads) transpose_kernel(const TransposeParams p) { transpose_rows(p); }

}  // namespace
}  // namespace cuda_step

void transpose_cuda(const Transpose& t, Stream stream) {
  using namespace cuda_step;
  check_transpose_cuda(t);
  const int64_t rows = t.src.shape[0], cols = t.src.shape[1];
  if (rows == 0 || cols == 0) return;
  const TransposeParams p{t.src.ptr<const float>(), t.dst.ptr<float>(), rows, cols, t.src.strides[0],
                          t.dst.strides[0]};
  const dim3 grid = transpose_grid(rows, cols);
  const DeviceGuard on(t.src.device);
  transpose_kernel<<<grid, kTransposeThreads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "transpose_kernel launch");
}

}  // namespace attnzoo
