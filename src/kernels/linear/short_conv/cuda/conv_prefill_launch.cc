#include "kernels/linear/short_conv/cuda/conv_prefill_launch.h"

#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_conv_prefill;

int64_t channel_blocks(const ConvProblem& p) { return (p.D + kThreads - 1) / kThreads; }

int64_t tile_count(const ConvProblem& p) {
  int64_t n = 0;
  for (int64_t len : p.seqs.length) n += (len + kTileTokens - 1) / kTileTokens;
  return n;
}

}  // namespace

void check_cuda_conv_prefill(const ConvProblem& p) {
  require_aligned(p.x, dtype_size(p.x_dtype), "x");
  require_aligned(p.y, dtype_size(p.y_dtype), "y");
  require_aligned(p.weight_in.data, dtype_size(p.weight_in.dtype), "weight");
  if (!p.bias_in.empty()) require_aligned(p.bias_in.data, dtype_size(p.bias_in.dtype), "bias");
  if (p.initial_state) require_aligned(p.initial_state, sizeof(float), "initial_state");
  if (p.final_state) require_aligned(p.final_state, sizeof(float), "final_state");
  require_grid_fits(tile_count(p) * channel_blocks(p), "x", "ceil(tokens / 64) per sequence x ceil(D / 128)");
  require_grid_fits((p.seqs.count() * p.D + kThreads - 1) / kThreads, "x", "ceil(sequences x channels / 128)");
}

namespace cuda_conv_prefill {

PrefillLaunch plan_conv_prefill(const ConvProblem& p) {
  PrefillLaunch l;
  const int64_t N = p.seqs.count(), tiles = tile_count(p);
  if (N == 0 || (tiles == 0 && !p.final_state)) return l;
  l.empty = false;

  // Sequence offsets (also for padded batches: the state kernel finds every sequence the same way), then the
  // tiles, one sequence's tokens each, so a thread never crosses a sequence boundary inside its window.
  l.metadata.reserve(size_t(N + 1 + 2 * tiles));
  for (int64_t n = 0; n < N; ++n) l.metadata.push_back(p.seqs.begin[size_t(n)]);
  l.metadata.push_back(p.seqs.begin[size_t(N - 1)] + p.seqs.length[size_t(N - 1)]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < p.seqs.length[size_t(n)]; t += kTileTokens) {
      l.metadata.push_back(n);
      l.metadata.push_back(p.seqs.begin[size_t(n)] + t);
    }

  Params& params = l.params;
  params.x = p.x, params.weight = p.weight_in.data, params.bias = p.bias_in.data, params.y = p.y;
  params.x_t = elem_of(p.x_dtype), params.weight_t = elem_of(p.weight_in.dtype);
  params.bias_t = elem_of(p.bias_in.dtype), params.y_t = elem_of(p.y_dtype);
  params.initial_state = p.initial_state, params.final_state = p.final_state;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_indices ? p.state_stride : p.D * p.S;
  params.N = N, params.D = p.D;
  params.W = int(p.W), params.S = int(p.S);
  params.channel_blocks = int(channel_blocks(p));
  params.silu = p.activation == ConvActivation::silu;
  l.window = window_width(p.W);
  l.output_grid = unsigned(tiles * channel_blocks(p));
  l.state_grid = p.final_state ? unsigned((N * p.D + kThreads - 1) / kThreads) : 0u;
  return l;
}

}  // namespace cuda_conv_prefill
}  // namespace attnzoo
