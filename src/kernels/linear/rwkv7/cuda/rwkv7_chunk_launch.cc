#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"

#include <tuple>

#include "core/error.h"
#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_rwkv7_chunk;
using cuda_delta_chunk::round_up;
}  // namespace

void check_cuda_rwkv7_chunk(const Rwkv7Problem& p, int64_t chunk_size) {
  cuda_delta_chunk::check_chunk_shape(p.K, "r", "K", p.V, "v", "V", chunk_size);
  for (auto [data, dtype, name] : {std::tuple{p.r, p.r_dtype, "r"}, {p.w, p.w_dtype, "w"}, {p.k, p.k_dtype, "k"},
                                   {p.v, p.v_dtype, "v"}, {p.a, p.a_dtype, "a"}, {p.b, p.b_dtype, "b"},
                                   {static_cast<const void*>(p.o), p.o_dtype, "o"}})
    if (data) require_aligned(data, dtype_size(dtype), name);
  if (p.h0) require_aligned(p.h0, sizeof(float), "initial_state");
  if (p.ht) require_aligned(p.ht, sizeof(float), "final_state");
  require_grid_fits(cuda_delta_chunk::chunk_count(p.seqs, chunk_size) * p.H, "r", "chunks x heads");
  require_grid_fits(p.seqs.count() * p.H * (round_up(p.V, kStateCols) / kStateCols), "v",
                    "sequences x heads x ceil(V / 32)");
}

size_t rwkv7_chunk_scratch_per_chunk(int64_t H, int64_t K, int64_t V, int64_t chunk_size) {
  const int C = int(chunk_size), Kp = int(round_up(K, 16)), Vp = int(round_up(V, kStateCols));
  const int64_t bf16 = rows_elems(C, Kp) + rows_elems(2 * C, Kp) + rows_elems(2 * C, Vp) + rows_elems(C, Kp) +
                       rows_elems(C, 2 * C) + rows_elems(Kp, Vp);  // wm, kb, vsa, qg, pm, h
  const int64_t f32 = rows_elems(C, Vp) + Kp;                       // u, decay
  return size_t(H * (2 * bf16 + 4 * f32));
}

namespace cuda_rwkv7_chunk {

ChunkLaunch plan_rwkv7_chunk(const Rwkv7Problem& p, int64_t chunk_size) {
  ChunkLaunch l;
  if (!l.split(p.seqs, p.batch * p.T, p.ht != nullptr, chunk_size)) return l;
  const int64_t N = p.seqs.count(), NC = int64_t(l.chunks.size());
  const int C = l.C;

  Params& params = l.params;
  params.r = p.r, params.w = p.w, params.k = p.k, params.v = p.v, params.a = p.a, params.b = p.b, params.o = p.o;
  params.r_t = elem_of(p.r_dtype), params.w_t = elem_of(p.w_dtype), params.k_t = elem_of(p.k_dtype);
  params.v_t = elem_of(p.v_dtype), params.a_t = elem_of(p.a_dtype), params.b_t = elem_of(p.b_dtype);
  params.o_t = elem_of(p.o_dtype);
  params.initial_state = p.h0, params.final_state = p.ht;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_indices ? p.state_stride : p.H * p.K * p.V;
  params.n_chunks = NC;
  params.H = int(p.H), params.K = int(p.K), params.V = int(p.V);
  params.Kp = int(round_up(p.K, 16)), params.Vp = int(round_up(p.V, kStateCols));
  params.scale = p.scale;
  const int Kp = params.Kp, Vp = params.Vp;

  l.intra_grid = unsigned(NC * p.H);
  l.output_grid = l.intra_grid;
  l.state_grid = unsigned(N * p.H * (Vp / kStateCols));
  l.intra_smem = IntraSmem(C, Kp, Vp).bytes;
  l.state_smem = StateSmem(C, Kp).bytes;
  l.output_smem = OutputSmem(C, Kp, Vp).bytes;

  // One allocation: the metadata first (uploaded), then the scratch.
  cuda_delta_chunk::ScratchLayout at;
  const size_t per = size_t(NC * p.H);
  l.take_table(at);
  l.metadata_bytes = at.end;
  l.wm_at = at.take(per * size_t(rows_elems(C, Kp)) * 2);
  l.u_at = at.take(per * size_t(rows_elems(C, Vp)) * 4);
  l.kb_at = at.take(per * size_t(rows_elems(2 * C, Kp)) * 2);
  l.vsa_at = at.take(per * size_t(rows_elems(2 * C, Vp)) * 2);
  l.qg_at = at.take(per * size_t(rows_elems(C, Kp)) * 2);
  l.pm_at = at.take(per * size_t(rows_elems(C, 2 * C)) * 2);
  l.decay_at = at.take(per * size_t(Kp) * 4);
  l.h_at = at.take(per * size_t(rows_elems(Kp, Vp)) * 2);
  l.scratch_bytes = at.bytes();
  return l;
}

std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l) { return l.table_bytes(); }

void bind_scratch(ChunkLaunch& l, unsigned char* base) {
  Params& params = l.params;
  l.bind_table(params, base);
  params.wm = reinterpret_cast<uint16_t*>(base + l.wm_at);
  params.u = reinterpret_cast<float*>(base + l.u_at);
  params.kb = reinterpret_cast<uint16_t*>(base + l.kb_at);
  params.vsa = reinterpret_cast<uint16_t*>(base + l.vsa_at);
  params.qg = reinterpret_cast<uint16_t*>(base + l.qg_at);
  params.pm = reinterpret_cast<uint16_t*>(base + l.pm_at);
  params.decay = reinterpret_cast<float*>(base + l.decay_at);
  params.h = reinterpret_cast<uint16_t*>(base + l.h_at);
}

}  // namespace cuda_rwkv7_chunk
}  // namespace attnzoo
