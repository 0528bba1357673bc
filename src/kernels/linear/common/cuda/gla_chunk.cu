// The CUDA chunked gated linear recurrence's launch: one stream-ordered allocation for the metadata and the
// scratch, then the kernels per chunk size (three, or four with the keys kernel of shared_keys plans). What it
// refuses and every size are decided in gla_chunk_launch.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/chunk_pass_launch.cuh"
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/cuda/gla_chunk_launch.h"
#include "kernels/linear/common/cuda/gla_chunk_keys.cuh"
#include "kernels/linear/common/cuda/gla_chunk_output.cuh"
#include "kernels/linear/common/cuda/gla_chunk_prep.cuh"
#include "kernels/linear/common/cuda/gla_chunk_state.cuh"

namespace attnzoo {
namespace cuda_gla_chunk {

// The prep pass reads its shared memory as its f32 G rows.
template <int C>
__device__ __forceinline__ void gla_chunk_prep_pass(const Params& p, unsigned char* smem) {
  gla_chunk_prep<C>(p, reinterpret_cast<float*>(smem));
}

namespace {

using cuda_delta_chunk::launch_pass;

template <int C>
void run(const ChunkLaunch& l, cudaStream_t stream) {
  launch_pass<Params, gla_chunk_prep_pass<C>>(l.prep_grid, l.prep_smem, stream, l.params, "gla_chunk_prep launch");
  launch_pass<Params, gla_chunk_keys<C>>(l.keys_grid, l.keys_smem, stream, l.params, "gla_chunk_keys launch");
  launch_pass<Params, gla_chunk_state<C>>(l.state_grid, l.state_smem, stream, l.params, "gla_chunk_state launch");
  launch_pass<Params, gla_chunk_output<C>>(l.output_grid, l.output_smem, stream, l.params, "gla_chunk_output launch");
}

}  // namespace
}  // namespace cuda_gla_chunk

void run_gla_chunk_plan(cuda_gla_chunk::ChunkLaunch plan, Stream stream, const char* arg) {
  if (plan.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  const size_t smem = std::max({plan.prep_smem, plan.keys_smem, plan.state_smem, plan.output_smem});
  cuda_delta_chunk::run_chunk_plan(
      plan, smem, arg,
      "keys of " + std::to_string(plan.params.K) + " and values of " + std::to_string(plan.params.V), cuda_stream,
      [&](auto c) { cuda_gla_chunk::run<decltype(c)::value>(plan, cuda_stream); });
}

void chunk_gla_cuda(const GlaProblem& p, Stream stream) {
  run_gla_chunk_plan(cuda_gla_chunk::plan_gla_chunk(p), stream, "q");
}

}  // namespace attnzoo
