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

namespace {

template <int C>
void run(const ChunkLaunch& l, cudaStream_t stream) {
  launch_pass<Params, delta_chunk_intra<C>>(l.intra_grid, l.intra_smem, stream, l.params, "delta_chunk_intra launch");
  launch_pass<Params, delta_chunk_state<C>>(l.state_grid, l.state_smem, stream, l.params, "delta_chunk_state launch");
  launch_pass<Params, delta_chunk_output<C>>(l.output_grid, l.output_smem, stream, l.params,
              "delta_chunk_output launch");
}

}  // namespace
}  // namespace cuda_delta_chunk

void chunk_delta_cuda(const DeltaProblem& p, Stream stream) {
  cuda_delta_chunk::ChunkLaunch plan = cuda_delta_chunk::plan_delta_chunk(p);
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const size_t smem = std::max({plan.intra_smem, plan.state_smem, plan.output_smem});
  const std::string shape = "K=" + std::to_string(p.K) + " and V=" + std::to_string(p.V);
  cuda_delta_chunk::run_chunk_plan(plan, smem, "q", shape, cuda_stream,
                                   [&](auto c) { cuda_delta_chunk::run<decltype(c)::value>(plan, cuda_stream); });
}

}  // namespace attnzoo
