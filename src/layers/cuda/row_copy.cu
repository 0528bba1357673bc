// The row copy launcher (row_copy_cuda.h); the kernel's body is row_copy_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/cuda/row_copy_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

template <int N>
__global__ void __launch_bounds__(kCopyThreads) row_copy_kernel(const RowCopyParams p) {
  copy_rows<N>(p);
}

}  // namespace
}  // namespace cuda_step

void copy_rows_cuda(const RowCopy& c, Stream stream) {
  using namespace cuda_step;
  check_copy_rows_cuda(c);
  const int64_t cols = c.src.shape[1];
  if (c.rows == 0 || cols == 0) return;
  const RowCopyParams p{c.src.ptr<const float>(), c.dst.ptr<float>(), c.src_rows, c.dst_rows,
                        c.rows,                   cols,              c.src.strides[0], c.dst.strides[0]};
  // 16-byte accesses when every row start on both sides is 16-byte aligned and the row is whole vectors.
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const bool vec = cols % 4 == 0 && p.src_stride % 4 == 0 && p.dst_stride % 4 == 0 && aligned(p.src) && aligned(p.dst);
  const int n = vec ? 4 : 1;
  const dim3 grid(grid_for(cols / n, kCopyThreads), grid_rows(c.rows));
  const DeviceGuard on(c.src.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (vec) {
    row_copy_kernel<4><<<grid, kCopyThreads, 0, s>>>(p);
  } else {
    row_copy_kernel<1><<<grid, kCopyThreads, 0, s>>>(p);
  }
  cuda_check(cudaGetLastError(), "row_copy_kernel launch");
}

}  // namespace attnzoo
