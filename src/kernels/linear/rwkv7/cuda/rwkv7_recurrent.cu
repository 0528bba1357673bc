// The CUDA RWKV-7 recurrence's launcher: the sequences' upload and the launch of the plan
// (rwkv7_recurrent_launch.h, which also holds what the kernel refuses). Dtypes are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/packed_offsets_upload.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_kernel.cuh"

namespace attnzoo {
namespace cuda_rwkv7 {

template <int kRows>
__global__ void __launch_bounds__(cuda_linear::bound_threads(kRows), cuda_linear::bound_ctas(kRows))
    rwkv7_recurrent_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  rwkv7_recurrent_rows<kRows>(p, smem);
}

}  // namespace cuda_rwkv7

void recurrent_rwkv7_cuda(const Rwkv7Problem& p, Stream stream) {
  cuda_rwkv7::RecurrentLaunch l = cuda_rwkv7::plan_rwkv7_recurrent(p);
  if (l.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  auto launch = [&] {
    cuda_linear::with_rows(l.params.rows, [&](auto rows) {
      cuda_rwkv7::rwkv7_recurrent_kernel<decltype(rows)::value><<<l.grid, l.threads, l.smem_bytes, cuda_stream>>>(
          l.params);
    });
    cuda_check(cudaGetLastError(), "rwkv7_recurrent_kernel launch");
  };
  cuda_linear::launch_with_offsets(l.seq_offsets, cuda_stream, &l.params.seq_offsets, launch);
}

}  // namespace attnzoo
