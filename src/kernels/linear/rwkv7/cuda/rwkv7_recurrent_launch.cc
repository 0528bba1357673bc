#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"

#include <string>
#include <tuple>

#include "core/error.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_rwkv7;

int64_t units(const Rwkv7Problem& p) { return p.seqs.count() * p.H * ((p.V + kCols - 1) / kCols); }

}  // namespace

void check_cuda_rwkv7_recurrent(const Rwkv7Problem& p) {
  require(p.K <= kMaxK, "r", [&] {
    return "K=" + std::to_string(p.K) + " exceeds " + std::to_string(kMaxK) +
           ", the widest state rows the CUDA recurrence keeps in registers";
  });
  for (auto [data, dtype, name] : {std::tuple{p.r, p.r_dtype, "r"}, {p.w, p.w_dtype, "w"}, {p.k, p.k_dtype, "k"},
                                   {p.v, p.v_dtype, "v"}, {p.a, p.a_dtype, "a"}, {p.b, p.b_dtype, "b"},
                                   {static_cast<const void*>(p.o), p.o_dtype, "o"}})
    if (data) require_aligned(data, dtype_size(dtype), name);
  if (p.h0) require_aligned(p.h0, sizeof(float), "initial_state");
  if (p.ht) require_aligned(p.ht, sizeof(float), "final_state");
  // A unit per (sequence, head, 32 columns), units_per_cta(K) of them to a CTA on a one-dimensional grid.
  require_grid_fits(cuda_linear::recurrent_grid(units(p), p.K).ctas, "v",
                    "sequences x heads x ceil(V / 32) / units per CTA");
}

namespace cuda_rwkv7 {

RecurrentLaunch plan_rwkv7_recurrent(const Rwkv7Problem& p) {
  RecurrentLaunch l;
  const int64_t N = p.seqs.count();
  if (N == 0 || (p.batch * p.T == 0 && !p.ht)) return l;
  l.empty = false;

  // Padded batches need no metadata (sequence n is rows [n T, n T + T)); packed ones upload their offsets.
  l.seq_offsets = packed_offsets(p.seqs, p.batch, p.T);

  Params& params = l.params;
  params.r = p.r, params.w = p.w, params.k = p.k, params.v = p.v, params.a = p.a, params.b = p.b, params.o = p.o;
  params.r_t = elem_of(p.r_dtype), params.w_t = elem_of(p.w_dtype), params.k_t = elem_of(p.k_dtype);
  params.v_t = elem_of(p.v_dtype), params.a_t = elem_of(p.a_dtype), params.b_t = elem_of(p.b_dtype);
  params.o_t = elem_of(p.o_dtype);
  params.initial_state = p.h0, params.final_state = p.ht;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_stride;
  params.T = p.T;
  params.H = int(p.H), params.K = int(p.K), params.V = int(p.V);
  params.slices = int((p.V + kCols - 1) / kCols);
  params.scale = p.scale;

  const cuda_linear::RecurrentGrid grid = cuda_linear::recurrent_grid(units(p), p.K);
  params.units = grid.units;
  params.rows = grid.rows;
  params.total_units = units(p);
  l.grid = unsigned(grid.ctas);
  l.threads = unsigned(grid.threads);
  l.smem_bytes = stage_bytes(l.threads);
  return l;
}

}  // namespace cuda_rwkv7
}  // namespace attnzoo
