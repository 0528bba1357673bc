// The CUDA short-convolution prefill's launcher: the metadata's upload and the two launches of the plan
// (conv_prefill_launch.h, which also holds what the kernels refuse). One output kernel per window width.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/common/cuda/packed_offsets_upload.cuh"
#include "kernels/linear/short_conv/cuda/conv_prefill_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_kernel.cuh"
#include "kernels/linear/short_conv/cuda/conv_prefill_launch.h"

namespace attnzoo {
namespace cuda_conv_prefill {

template <int kWindow>
__global__ void __launch_bounds__(kThreads) conv_prefill_output_kernel(const Params p) {
  conv_prefill_output_thread<kWindow>(p);
}

__global__ void __launch_bounds__(kThreads) conv_prefill_state_kernel(const Params p) {
  conv_prefill_state_thread(p);
}

}  // namespace cuda_conv_prefill

using namespace cuda_conv_prefill;

void conv_prefill_cuda(const ConvProblem& p, Stream stream) {
  PrefillLaunch l = plan_conv_prefill(p);
  if (l.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  auto launch = [&] {
    if (l.output_grid > 0) {
      switch (l.window) {
        case 4: conv_prefill_output_kernel<4><<<l.output_grid, l.threads, 0, cuda_stream>>>(l.params); break;
        case 8: conv_prefill_output_kernel<8><<<l.output_grid, l.threads, 0, cuda_stream>>>(l.params); break;
        default: conv_prefill_output_kernel<16><<<l.output_grid, l.threads, 0, cuda_stream>>>(l.params); break;
      }
      cuda_check(cudaGetLastError(), "conv_prefill_output_kernel launch");
    }
    if (l.state_grid > 0) {  // stream-ordered after the outputs' reads of an initial state it may alias
      conv_prefill_state_kernel<<<l.state_grid, l.threads, 0, cuda_stream>>>(l.params);
      cuda_check(cudaGetLastError(), "conv_prefill_state_kernel launch");
    }
  };
  cuda_linear::launch_with_offsets(l.metadata, cuda_stream, &l.params.seq_offsets, launch);
}

}  // namespace attnzoo
