// The CUDA short-convolution decode step's host side: what it refuses and the launch.
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_update_kernel.cuh"

namespace attnzoo {
namespace cuda_conv {

__global__ void __launch_bounds__(kThreads) conv_update_kernel(const Params p) { conv_update_thread(p); }

}  // namespace cuda_conv

namespace {
using namespace cuda_conv;
using cuda_linear::elem_of;
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;

int64_t blocks(const ConvProblem& p) { return (p.seqs.count() * p.D + kThreads - 1) / kThreads; }

}  // namespace

void check_cuda_conv_update(const ConvProblem& p) {
  require_aligned(p.x, dtype_size(p.x_dtype), "x");
  require_aligned(p.y, dtype_size(p.y_dtype), "y");
  require_aligned(p.weight_in.data, dtype_size(p.weight_in.dtype), "weight");
  if (!p.bias_in.empty()) require_aligned(p.bias_in.data, dtype_size(p.bias_in.dtype), "bias");
  if (p.final_state) require_aligned(p.final_state, sizeof(float), "conv_state");
  require_grid_fits(blocks(p), "x", "ceil(sequences x channels / 128)");
}

void conv_update_cuda(const ConvProblem& p, Stream stream) {
  const int64_t N = p.seqs.count();
  if (N == 0 || p.D == 0) return;
  Params params{};
  params.x = p.x, params.weight = p.weight_in.data, params.bias = p.bias_in.data, params.y = p.y;
  params.x_t = elem_of(p.x_dtype), params.weight_t = elem_of(p.weight_in.dtype);
  params.bias_t = elem_of(p.bias_in.dtype), params.y_t = elem_of(p.y_dtype);
  params.state = p.final_state;  // == p.initial_state: causal_conv1d_update advances the state in place
  params.N = N, params.L = N ? p.seqs.length[0] : 0, params.D = p.D;
  params.W = int(p.W), params.S = int(p.S);
  params.silu = p.activation == ConvActivation::silu;
  conv_update_kernel<<<unsigned(blocks(p)), kThreads, 0, static_cast<cudaStream_t>(stream.handle)>>>(params);
  cuda_check(cudaGetLastError(), "conv_update_kernel launch");
}

}  // namespace attnzoo
