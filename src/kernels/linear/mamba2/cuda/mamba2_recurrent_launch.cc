#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"

#include <string>

#include "core/error.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/mamba2/cuda/mamba2_launch_checks.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_grid_fits;
using namespace cuda_mamba2;

std::string str(int64_t v) { return std::to_string(v); }

int64_t ctas(const Mamba2Problem& p) { return p.seqs.count() * p.H * ((p.P + kRowsPerCta - 1) / kRowsPerCta); }

}  // namespace

void check_cuda_mamba2_recurrent(const Mamba2Problem& p) {
  require(p.N <= kMaxN, "B", [&] {
    return "state size N=" + str(p.N) + " exceeds " + str(kMaxN) + ", the widest state rows the CUDA recurrence " +
           "keeps in registers";
  });
  cuda_mamba2::require_mamba2_aligned(p);
  // One CTA per (sequence, head, 16 state rows) on a one-dimensional grid.
  require_grid_fits(ctas(p), "x", "sequences x heads x ceil(P / 16)");
}

namespace cuda_mamba2 {

RecurrentLaunch plan_mamba2_recurrent(const Mamba2Problem& p) {
  RecurrentLaunch l;
  const int64_t N = p.seqs.count();
  if (N == 0 || (p.batch * p.T == 0 && !p.ht)) return l;
  l.empty = false;
  l.cols_per_lane = p.N <= 64 ? 2 : p.N <= 128 ? 4 : 8;

  // Padded batches need no metadata (sequence n is rows [n T, n T + T)); packed ones upload their offsets.
  l.seq_offsets = packed_offsets(p.seqs, p.batch, p.T);

  Params& params = l.params;
  params.x = p.x, params.B = p.Bm, params.C = p.Cm, params.z = p.z, params.y = p.y;
  params.dt = p.dt_in.data, params.A = p.A_in.data, params.D = p.D_in.data, params.dt_bias = p.dt_bias_in.data;
  params.x_t = elem_of(p.x_dtype), params.B_t = elem_of(p.b_dtype), params.C_t = elem_of(p.c_dtype);
  params.z_t = elem_of(p.z_dtype), params.y_t = elem_of(p.y_dtype);
  params.dt_t = elem_of(p.dt_in.dtype), params.A_t = elem_of(p.A_in.dtype), params.D_t = elem_of(p.D_in.dtype);
  params.dt_bias_t = elem_of(p.dt_bias_in.dtype);
  params.initial_state = p.h0;
  params.final_state = p.ht;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_stride;
  params.T = p.T;
  params.H = int(p.H), params.P = int(p.P), params.G = int(p.G), params.N = int(p.N);
  params.heads_per_group = int(p.heads_per_group());
  params.slices = int((p.P + kRowsPerCta - 1) / kRowsPerCta);
  params.D_per_channel = p.D_in.ndim == 2;
  params.dt_softplus = p.dt_softplus, params.dt_limit = p.dt_limit;
  params.dt_min = p.dt_min, params.dt_max = p.dt_max;

  l.grid = unsigned(ctas(p));
  l.threads = unsigned(kThreads);
  return l;
}

}  // namespace cuda_mamba2
}  // namespace attnzoo
