// The CUDA Mamba-2 recurrence's launcher: the sequences' upload and the launch of the plan
// (mamba2_recurrent_launch.h, which also holds what the kernel refuses). One kernel per register width of a state
// row (N up to 64, 128 or 256); dtypes are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
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
  if (l.seq_offsets.empty()) return launch();
  const size_t bytes = l.seq_offsets.size() * sizeof(int64_t);
  StreamScratch scratch(bytes, cuda_stream);
  scratch.upload(l.seq_offsets.data(), bytes);
  l.params.seq_offsets = reinterpret_cast<const int64_t*>(scratch.data());
  launch();
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo
