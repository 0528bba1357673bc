#include "kernels/linear/mamba2/cuda/mamba2_chunk_launch.h"

#include <string>

#include "core/error.h"
#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_launch_checks.h"

namespace attnzoo {
namespace {
using cuda_delta_chunk::check_chunk_shape;
using cuda_delta_chunk::chunk_count;
using cuda_gla_chunk::kMaxDim;
using cuda_gla_chunk::kStateCols;
using cuda_linear::elem_of;
using cuda_linear::require_grid_fits;

}  // namespace

bool cuda_mamba2_chunk_fits(const Mamba2Problem& p) { return p.N <= kMaxDim && p.P <= kMaxDim; }

void check_cuda_mamba2_chunk(const Mamba2Problem& p) {
  check_chunk_shape(p.N, "B", "state size N", p.P, "x", "head dim P", p.chunk_size);
  cuda_mamba2::require_mamba2_aligned(p);
  require_grid_fits(chunk_count(p.seqs, p.chunk_size) * p.H, "x", "chunks x heads");
  require_grid_fits(p.seqs.count() * p.H * ((p.P + kStateCols - 1) / kStateCols), "x",
                    "sequences x heads x ceil(P / 32)");
}

namespace cuda_mamba2 {

cuda_gla_chunk::ChunkLaunch plan_mamba2_chunk(const Mamba2Problem& p) {
  // The SSD as simple GLA: the groups are the key heads (C and B [B, T, G, N]), the Mamba heads the value heads.
  GlaProblem g;
  g.device = g.g_gamma_device = p.device;
  g.q = p.Cm, g.q_dtype = p.c_dtype;
  g.k = p.Bm, g.k_dtype = p.b_dtype;
  g.v = p.x, g.v_dtype = p.x_dtype;
  g.B = p.batch, g.T = p.T, g.H = p.G, g.HV = p.H, g.K = p.N, g.V = p.P;
  g.seqs = p.seqs;
  g.gate = GateKind::scalar;  // no g: the prep forms A dt' from ssd
  g.scale = 1.f;
  g.initial_state = p.h0, g.final_state = p.ht;
  g.state_indices = p.state_indices, g.state_stride = p.state_stride;  // pool slots: [H, P, N] rows, stride apart
  g.o = p.y, g.o_dtype = p.y_dtype;
  g.chunk_size = p.chunk_size;

  cuda_gla_chunk::SsdParams ssd{};
  ssd.dt = p.dt_in.data, ssd.A = p.A_in.data, ssd.dt_bias = p.dt_bias_in.data, ssd.D = p.D_in.data, ssd.z = p.z;
  ssd.dt_t = elem_of(p.dt_in.dtype), ssd.A_t = elem_of(p.A_in.dtype), ssd.dt_bias_t = elem_of(p.dt_bias_in.dtype);
  ssd.D_t = elem_of(p.D_in.dtype), ssd.z_t = elem_of(p.z_dtype);
  ssd.D_per_channel = p.D_in.ndim == 2;
  ssd.dt_softplus = p.dt_softplus, ssd.dt_limit = p.dt_limit;
  ssd.dt_min = p.dt_min, ssd.dt_max = p.dt_max;
  cuda_gla_chunk::ChunkLaunch l = cuda_gla_chunk::plan_gla_chunk(g, ssd);
  // Mamba-2's states are [P, N]: key row n (a state entry of B) at stride 1, value column i at stride N.
  l.params.state_row = 1, l.params.state_col = p.N;
  return l;
}

}  // namespace cuda_mamba2
}  // namespace attnzoo
