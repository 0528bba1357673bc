// The CUDA recurrence's launch: the sequences' upload and one kernel per gate kind (dtypes are run-time,
// float_elem.cuh). What it refuses and its parameters are decided in delta_recurrent_launch.cc.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/packed_offsets_upload.cuh"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_kernel.cuh"

namespace attnzoo {
namespace cuda_delta {

template <DeltaGate kGate>
__global__ void __launch_bounds__(kMaxThreads) delta_recurrent_kernel(const Params p) {
  delta_recurrent_cta<kGate>(p);
}

}  // namespace cuda_delta

void recurrent_delta_cuda(const DeltaProblem& p, Stream stream) {
  cuda_delta::RecurrentLaunch plan = cuda_delta::plan_delta_recurrent(p);
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  cuda_delta::Params& params = plan.params;
  const dim3 grid(plan.grid), block(plan.threads);
  auto launch = [&] {
    switch (p.gate) {
      case DeltaGate::none: delta_recurrent_kernel<DeltaGate::none><<<grid, block, 0, cuda_stream>>>(params); break;
      case DeltaGate::head: delta_recurrent_kernel<DeltaGate::head><<<grid, block, 0, cuda_stream>>>(params); break;
      case DeltaGate::channel:
        delta_recurrent_kernel<DeltaGate::channel><<<grid, block, 0, cuda_stream>>>(params);
        break;
    }
    cuda_check(cudaGetLastError(), "delta_recurrent_kernel launch");
  };
  cuda_linear::launch_with_offsets(plan.seq_offsets, cuda_stream, &params.seq_offsets, launch);
}

}  // namespace attnzoo
