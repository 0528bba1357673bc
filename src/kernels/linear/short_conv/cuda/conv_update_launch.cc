#include "kernels/linear/short_conv/cuda/conv_update_launch.h"

#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_conv;

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

namespace cuda_conv {

UpdateLaunch plan_conv_update(const ConvProblem& p) {
  UpdateLaunch l;
  const int64_t N = p.seqs.count();
  if (N == 0 || p.D == 0) return l;
  l.empty = false;
  Params& params = l.params;
  params.x = p.x, params.weight = p.weight_in.data, params.bias = p.bias_in.data, params.y = p.y;
  params.x_t = elem_of(p.x_dtype), params.weight_t = elem_of(p.weight_in.dtype);
  params.bias_t = elem_of(p.bias_in.dtype), params.y_t = elem_of(p.y_dtype);
  params.state = p.final_state;  // == p.initial_state: causal_conv1d_update advances the state in place
  params.state_indices = p.state_indices;
  params.state_stride = p.state_stride;
  params.N = N, params.L = p.seqs.length[0], params.D = p.D;
  params.W = int(p.W), params.S = int(p.S);
  params.silu = p.activation == ConvActivation::silu;
  l.grid = unsigned(blocks(p));
  l.threads = unsigned(kThreads);
  return l;
}

}  // namespace cuda_conv
}  // namespace attnzoo
