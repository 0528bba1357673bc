// The CUDA chunked RWKV-7's launch: one stream-ordered allocation for the chunk table and the scratch, then the
// three kernels per chunk size. What it refuses and every size are decided in rwkv7_chunk_launch.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/chunk_pass_launch.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_intra.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_output.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_state.cuh"

namespace attnzoo {
namespace cuda_rwkv7_chunk {

template <int C>
__global__ void __launch_bounds__(kThreads) rwkv7_chunk_intra_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  rwkv7_chunk_intra<C>(p, smem);
}
template <int C>
__global__ void __launch_bounds__(kThreads) rwkv7_chunk_state_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  rwkv7_chunk_state<C>(p, smem);
}
template <int C>
__global__ void __launch_bounds__(kThreads) rwkv7_chunk_output_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  rwkv7_chunk_output<C>(p, smem);
}

namespace {

template <int C>
void run(const ChunkLaunch& l, cudaStream_t stream) {
  using cuda_delta_chunk::launch_pass;
  launch_pass(rwkv7_chunk_intra_kernel<C>, l.intra_grid, l.intra_smem, stream, l.params, "rwkv7_chunk_intra launch");
  launch_pass(rwkv7_chunk_state_kernel<C>, l.state_grid, l.state_smem, stream, l.params, "rwkv7_chunk_state launch");
  launch_pass(rwkv7_chunk_output_kernel<C>, l.output_grid, l.output_smem, stream, l.params,
              "rwkv7_chunk_output launch");
}

}  // namespace
}  // namespace cuda_rwkv7_chunk

void chunk_rwkv7_cuda(const Rwkv7Problem& p, int64_t chunk_size, Stream stream) {
  cuda_rwkv7_chunk::ChunkLaunch plan = cuda_rwkv7_chunk::plan_rwkv7_chunk(p, chunk_size);
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const int optin = cuda_delta_chunk::shared_memory_optin();
  const size_t smem = std::max({plan.intra_smem, plan.state_smem, plan.output_smem});
  require(smem <= size_t(optin), "r", [&] {
    return "K=" + std::to_string(p.K) + " and V=" + std::to_string(p.V) + " with chunk_size " +
           std::to_string(chunk_size) + " need " + std::to_string(smem) +
           " bytes of shared memory per block; this GPU allows " + std::to_string(optin) +
           " (a smaller chunk_size needs less)";
  });
  StreamScratch scratch(plan.scratch_bytes, cuda_stream);
  const std::vector<unsigned char> metadata = cuda_rwkv7_chunk::metadata_bytes_of(plan);
  scratch.upload(metadata.data(), metadata.size());
  cuda_rwkv7_chunk::bind_scratch(plan, scratch.data());
  switch (plan.C) {
    case 16: cuda_rwkv7_chunk::run<16>(plan, cuda_stream); break;
    case 32: cuda_rwkv7_chunk::run<32>(plan, cuda_stream); break;
    default: cuda_rwkv7_chunk::run<64>(plan, cuda_stream); break;
  }
  scratch.finish();  // ordered after the kernels on the stream
}

}  // namespace attnzoo
