// The CUDA chunked delta rule's launch: one stream-ordered allocation for the chunk table and the scratch, then
// the three kernels per chunk size. What it refuses and every size are decided in delta_chunk_launch.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/chunk_pass_launch.cuh"
#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/delta_chunk_intra.cuh"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/delta_chunk_output.cuh"
#include "kernels/linear/common/cuda/delta_chunk_state.cuh"

namespace attnzoo {
namespace cuda_delta_chunk {

template <int C>
__global__ void __launch_bounds__(kThreads) delta_chunk_intra_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  delta_chunk_intra<C>(p, smem);
}
template <int C>
__global__ void __launch_bounds__(kThreads) delta_chunk_state_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  delta_chunk_state<C>(p, smem);
}
template <int C>
__global__ void __launch_bounds__(kThreads) delta_chunk_output_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  delta_chunk_output<C>(p, smem);
}

namespace {

template <int C>
void run(const ChunkLaunch& l, cudaStream_t stream) {
  launch_pass(delta_chunk_intra_kernel<C>, l.intra_grid, l.intra_smem, stream, l.params, "delta_chunk_intra launch");
  launch_pass(delta_chunk_state_kernel<C>, l.state_grid, l.state_smem, stream, l.params, "delta_chunk_state launch");
  launch_pass(delta_chunk_output_kernel<C>, l.output_grid, l.output_smem, stream, l.params,
              "delta_chunk_output launch");
}

}  // namespace
}  // namespace cuda_delta_chunk

void chunk_delta_cuda(const DeltaProblem& p, Stream stream) {
  cuda_delta_chunk::ChunkLaunch plan = cuda_delta_chunk::plan_delta_chunk(p);
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const int optin = cuda_delta_chunk::shared_memory_optin();
  const size_t smem = std::max({plan.intra_smem, plan.state_smem, plan.output_smem});
  require(smem <= size_t(optin), "q", [&] {
    return "K=" + std::to_string(p.K) + " and V=" + std::to_string(p.V) + " with chunk_size " +
           std::to_string(p.chunk_size) + " need " + std::to_string(smem) +
           " bytes of shared memory per block; this GPU allows " + std::to_string(optin) +
           " (a smaller chunk_size needs less)";
  });
  StreamScratch scratch(plan.scratch_bytes, cuda_stream);
  const std::vector<unsigned char> metadata = cuda_delta_chunk::metadata_bytes_of(plan);
  scratch.upload(metadata.data(), metadata.size());
  cuda_delta_chunk::bind_scratch(plan, scratch.data());
  switch (plan.C) {
    case 16: cuda_delta_chunk::run<16>(plan, cuda_stream); break;
    case 32: cuda_delta_chunk::run<32>(plan, cuda_stream); break;
    default: cuda_delta_chunk::run<64>(plan, cuda_stream); break;
  }
  scratch.finish();  // ordered after the kernels on the stream
}

}  // namespace attnzoo
