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

namespace {

template <int C>
void run(const ChunkLaunch& l, cudaStream_t stream) {
  using cuda_delta_chunk::launch_pass;
  launch_pass<Params, rwkv7_chunk_intra<C>>(l.intra_grid, l.intra_smem, stream, l.params, "rwkv7_chunk_intra launch");
  launch_pass<Params, rwkv7_chunk_state<C>>(l.state_grid, l.state_smem, stream, l.params, "rwkv7_chunk_state launch");
  launch_pass<Params, rwkv7_chunk_output<C>>(l.output_grid, l.output_smem, stream, l.params,
              "rwkv7_chunk_output launch");
}

}  // namespace
}  // namespace cuda_rwkv7_chunk

void chunk_rwkv7_cuda(const Rwkv7Problem& p, int64_t chunk_size, Stream stream) {
  cuda_rwkv7_chunk::ChunkLaunch plan = cuda_rwkv7_chunk::plan_rwkv7_chunk(p, chunk_size);
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const size_t smem = std::max({plan.intra_smem, plan.state_smem, plan.output_smem});
  const std::string shape = "K=" + std::to_string(p.K) + " and V=" + std::to_string(p.V);
  cuda_delta_chunk::run_chunk_plan(plan, smem, "r", shape, cuda_stream,
                                   [&](auto c) { cuda_rwkv7_chunk::run<decltype(c)::value>(plan, cuda_stream); });
}

}  // namespace attnzoo
