// The CUDA Mamba-2 recurrence's launcher: the sequences' upload and the launch of the plan
// (mamba2_recurrent_launch.h, which also holds what the kernel refuses). One kernel per register width of a state
// row (N up to 64, 128 or 256); dtypes are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/packed_offsets_upload.cuh"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_kernel.cuh"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"

namespace attnzoo {
namespace cuda_mamba2 {

template <int kColsPerLane>
__global__ void __launch_bounds__(kThreads) mamba2_recurrent_kernel(const Params p) {
  mamba2_recurrent_warp<kColsPerLane>(p);
}

}  // namespace cuda_mamba2

using namespace cuda_mamba2;

void recurrent_mamba2_cuda(const Mamba2Problem& p, Stream stream) {
  RecurrentLaunch l = plan_mamba2_recurrent(p);
  if (l.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const dim3 grid(l.grid), block(l.threads);
  auto launch = [&] {
    switch (l.cols_per_lane) {
      case 2: mamba2_recurrent_kernel<2><<<grid, block, 0, cuda_stream>>>(l.params); break;
      case 4: mamba2_recurrent_kernel<4><<<grid, block, 0, cuda_stream>>>(l.params); break;
      default: mamba2_recurrent_kernel<8><<<grid, block, 0, cuda_stream>>>(l.params); break;
    }
    cuda_check(cudaGetLastError(), "mamba2_recurrent_kernel launch");
  };
  cuda_linear::launch_with_offsets(l.seq_offsets, cuda_stream, &l.params.seq_offsets, launch);
}

}  // namespace attnzoo
