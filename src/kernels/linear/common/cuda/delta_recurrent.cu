// The CUDA recurrence's launch: the sequences' upload and one kernel per gate kind (dtypes are run-time,
// float_elem.cuh). What it refuses and its parameters are decided in delta_recurrent_launch.cc.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/packed_offsets_upload.cuh"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_kernel.cuh"

namespace attnzoo {
namespace cuda_delta {

template <DeltaGate kGate, int kRows>
__global__ void __launch_bounds__(cuda_linear::bound_threads(kRows), cuda_linear::bound_ctas(kRows))
    delta_recurrent_kernel(const Params p) {
  delta_recurrent_rows<kGate, kRows>(p);
}

template <DeltaGate kGate>
void launch_rows(const RecurrentLaunch& plan, cudaStream_t stream) {
  cuda_linear::with_rows(plan.params.rows, [&](auto rows) {
    delta_recurrent_kernel<kGate, decltype(rows)::value><<<plan.grid, plan.threads, 0, stream>>>(plan.params);
  });
}

}  // namespace cuda_delta

void recurrent_delta_cuda(const DeltaProblem& p, Stream stream) {
  cuda_delta::RecurrentLaunch plan = cuda_delta::plan_delta_recurrent(p);
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  auto launch = [&] {
    switch (p.gate) {
      case DeltaGate::none: cuda_delta::launch_rows<DeltaGate::none>(plan, cuda_stream); break;
      case DeltaGate::head: cuda_delta::launch_rows<DeltaGate::head>(plan, cuda_stream); break;
      case DeltaGate::channel: cuda_delta::launch_rows<DeltaGate::channel>(plan, cuda_stream); break;
    }
    cuda_check(cudaGetLastError(), "delta_recurrent_kernel launch");
  };
  cuda_linear::launch_with_offsets(plan.seq_offsets, cuda_stream, &plan.params.seq_offsets, launch);
}

}  // namespace attnzoo
