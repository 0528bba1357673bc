// The CUDA selective scan's launcher: the packed sequences' upload and the launch of the plan
// (selective_scan_launch.h, which also holds what the kernel refuses). One kernel per register width of a
// channel's state (N up to 16, 32, 64, 128 or 256); dtypes are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/packed_offsets_upload.cuh"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/cuda/selective_scan_kernel.cuh"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"

namespace attnzoo {
namespace cuda_mamba {

template <int kPerLane>
__global__ void __launch_bounds__(kThreads) selective_scan_kernel(const Params p) {
  selective_scan_channel<kPerLane>(p);
}

}  // namespace cuda_mamba

using namespace cuda_mamba;

void selective_scan_cuda(const SelectiveScanProblem& p, Stream stream) {
  ScanLaunch l = plan_selective_scan(p);
  if (l.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const dim3 grid(l.grid), block(l.threads);
  auto launch = [&] {
    switch (l.per_lane) {
      case 1: selective_scan_kernel<1><<<grid, block, 0, cuda_stream>>>(l.params); break;
      case 2: selective_scan_kernel<2><<<grid, block, 0, cuda_stream>>>(l.params); break;
      case 4: selective_scan_kernel<4><<<grid, block, 0, cuda_stream>>>(l.params); break;
      case 8: selective_scan_kernel<8><<<grid, block, 0, cuda_stream>>>(l.params); break;
      default: selective_scan_kernel<16><<<grid, block, 0, cuda_stream>>>(l.params); break;
    }
    cuda_check(cudaGetLastError(), "selective_scan_kernel launch");
  };
  cuda_linear::launch_with_offsets(l.seq_offsets, cuda_stream, &l.params.seq_offsets, launch);
}

}  // namespace attnzoo
