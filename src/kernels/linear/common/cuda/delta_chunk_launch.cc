#include "kernels/linear/common/cuda/delta_chunk_launch.h"

#include <utility>

#include "core/error.h"
#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/launch_checks.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_delta_chunk;
}  // namespace

void check_cuda_delta_chunk(const DeltaProblem& p) {
  check_chunk_shape(p.K, "q", "K", p.V, "v", "V", p.chunk_size);
  for (auto [t, name] : {std::pair{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.g, "g"}, {&p.beta, "beta"},
                         {&p.o, "o"}})
    if (!t->empty()) require_aligned(t->data, dtype_size(t->dtype), name);
  if (p.initial_state) require_aligned(p.initial_state, sizeof(float), "initial_state");
  if (p.final_state) require_aligned(p.final_state, sizeof(float), "final_state");
  require_grid_fits(chunk_count(p.seqs, p.chunk_size) * p.HV, "q", "chunks x value heads");
  require_grid_fits(p.seqs.count() * p.HV * (round_up(p.V, kStateCols) / kStateCols), "v",
                    "sequences x value heads x ceil(V / 32)");
}

namespace cuda_delta_chunk {

ChunkLaunch plan_delta_chunk(const DeltaProblem& p) {
  ChunkLaunch l;
  if (!l.split(p.seqs, p.B * p.T, p.final_state != nullptr, p.chunk_size)) return l;
  const int64_t N = p.seqs.count(), NC = int64_t(l.chunks.size());
  const int C = l.C;

  Params& params = l.params;
  params.q = p.q.data, params.k = p.k.data, params.v = p.v.data, params.beta = p.beta.data;
  params.g = p.gate == DeltaGate::none ? nullptr : p.g.data;
  params.o = p.o.data;
  params.q_t = elem_of(p.q.dtype), params.k_t = elem_of(p.k.dtype), params.v_t = elem_of(p.v.dtype);
  params.g_t = elem_of(p.g.dtype), params.beta_t = elem_of(p.beta.dtype), params.o_t = elem_of(p.o.dtype);
  set_shared_params(params, p, NC);
  params.l2norm = p.l2norm;
  params.channel = p.gate == DeltaGate::channel;

  l.intra_grid = unsigned(NC * p.HV);
  l.output_grid = l.intra_grid;
  l.state_grid = unsigned(N * p.HV * (params.Vp / kStateCols));
  l.intra_smem = IntraSmem(C, params.Kp, params.Vp, params.channel).bytes;
  l.state_smem = StateSmem(C, params.Kp).bytes;
  l.output_smem = OutputSmem(C, params.Kp, params.Vp, params.channel).bytes;

  // One allocation: the metadata first (uploaded), then the scratch.
  ScratchLayout at;
  const size_t per = size_t(NC * p.HV);
  l.take_table(at);
  l.metadata_bytes = at.end;
  l.w_at = at.take(per * size_t(w_elems(C, params.Kp)) * 2);
  l.kd_at = at.take(per * size_t(w_elems(C, params.Kp)) * 2);
  l.u_at = at.take(per * size_t(u_elems(C, params.Vp)) * 4);
  l.vnew_at = at.take(per * size_t(u_elems(C, params.Vp)) * 2);
  l.h_at = at.take(per * size_t(h_elems(params.Kp, params.Vp)) * 2);
  l.G_at = at.take(p.gate == DeltaGate::none ? 0 : size_t(p.B * p.T * p.HV * (params.channel ? p.K : 1)) * 4);
  l.scratch_bytes = at.bytes();
  return l;
}

std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l) { return l.table_bytes(); }

void bind_scratch(ChunkLaunch& l, unsigned char* base) {
  Params& params = l.params;
  l.bind_table(params, base);
  params.w = reinterpret_cast<uint16_t*>(base + l.w_at);
  params.kd = reinterpret_cast<uint16_t*>(base + l.kd_at);
  params.u = reinterpret_cast<float*>(base + l.u_at);
  params.vnew = reinterpret_cast<uint16_t*>(base + l.vnew_at);
  params.h = reinterpret_cast<uint16_t*>(base + l.h_at);
  params.G = params.g ? reinterpret_cast<float*>(base + l.G_at) : nullptr;
}

}  // namespace cuda_delta_chunk
}  // namespace attnzoo
