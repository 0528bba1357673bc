#include "kernels/linear/common/cuda/gla_chunk_launch.h"

#include <cstring>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/cuda/launch_checks.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_gla_chunk;
using cuda_delta_chunk::check_chunk_shape;
using cuda_delta_chunk::chunk_count;
using cuda_delta_chunk::round_up;
}  // namespace

void check_cuda_gla_chunk(const GlaProblem& p) {
  check_chunk_shape(p.K, "q", "K", p.V, "v", "V", p.chunk_size);
  require(!p.normalize, "normalize", "the CUDA chunked kernels carry no normaliser (the recurrent one does)");
  for (auto [data, dtype, name] : {std::tuple{p.q, p.q_dtype, "q"}, {p.k, p.k_dtype, "k"}, {p.v, p.v_dtype, "v"},
                                   {p.g, p.g_dtype, "g"}, {static_cast<const void*>(p.o), p.o_dtype, "o"}})
    if (data) require_aligned(data, dtype_size(dtype), name);
  for (auto [data, name] : {std::pair{static_cast<const void*>(p.initial_state), "initial_state"},
                            {p.final_state, "final_state"}})
    if (data) require_aligned(data, sizeof(float), name);
  if (p.g_gamma && !p.g_gamma_device.is_cpu()) require_aligned(p.g_gamma, sizeof(float), "g_gamma");
  require_grid_fits(chunk_count(p.seqs, p.chunk_size) * p.HV, "q", "chunks x value heads");
  require_grid_fits(p.seqs.count() * p.HV * (round_up(p.V, kStateCols) / kStateCols), "v",
                    "sequences x value heads x ceil(V / 32)");
}

namespace cuda_gla_chunk {

using cuda_delta_chunk::ScratchLayout;

ChunkLaunch plan_gla_chunk(const GlaProblem& p, const SsdParams& ssd) {
  ChunkLaunch l;
  if (!l.split(p.seqs, p.B * p.T, p.final_state != nullptr, p.chunk_size)) return l;
  const int64_t N = p.seqs.count(), NC = int64_t(l.chunks.size());
  const int C = l.C;
  if (p.g_gamma && p.g_gamma_device.is_cpu()) l.gamma.assign(p.g_gamma, p.g_gamma + p.HV);

  Params& params = l.params;
  params.q = p.q, params.k = p.k, params.v = p.v, params.g = p.g, params.o = p.o;
  params.q_t = elem_of(p.q_dtype), params.k_t = elem_of(p.k_dtype), params.v_t = elem_of(p.v_dtype);
  params.g_t = elem_of(p.g_dtype), params.o_t = elem_of(p.o_dtype);
  params.g_gamma = p.g_gamma && !p.g_gamma_device.is_cpu() ? p.g_gamma : nullptr;
  cuda_delta_chunk::set_shared_params(params, p, NC);
  params.feature_map = p.feature_map;
  params.channel = p.gate == GateKind::channel;
  params.ssd = ssd;
  params.state_row = p.V, params.state_col = 1;
  // Sharing pays where a key head serves several value heads; with one it would only add the scores' round trip.
  params.shared_keys = !params.channel && params.group > 1;
  const bool shared = params.shared_keys;

  l.prep_grid = unsigned(NC * p.HV);
  l.output_grid = l.prep_grid;
  l.keys_grid = shared ? unsigned(NC * p.H) : 0;
  l.state_grid = unsigned(N * p.HV * (params.Vp / kStateCols));
  l.prep_smem = prep_smem_bytes(C, params.Kp, params.channel, ssd.dt != nullptr);
  l.keys_smem = shared ? keys_smem_bytes(C, params.Kp) : 0;
  l.state_smem = StateSmem(C, params.Kp).bytes;
  l.output_smem = OutputSmem(C, params.Kp, params.Vp, params.channel, /*keys=*/!shared).bytes;

  // One allocation: the metadata first (uploaded), then the scratch.
  ScratchLayout at;
  const size_t per = size_t(NC * p.HV), per_key = size_t(NC * (shared ? p.H : p.HV));
  l.take_table(at);
  l.gamma_at = at.take(l.gamma.size() * sizeof(float));
  l.metadata_bytes = at.end;
  l.kd_at = at.take(per_key * size_t(kd_elems(C, params.Kp)) * 2);
  l.vb_at = at.take(shared ? 0 : per * size_t(v_elems(C, params.Vp)) * 2);
  l.vscale_at = at.take(shared ? per * size_t(C) * 4 : 0);
  l.qb_at = at.take(shared ? per_key * size_t(kd_elems(C, params.Kp)) * 2 : 0);
  l.scores_at = at.take(shared ? per_key * size_t(C) * C * 4 : 0);
  l.decay_at = at.take(per * size_t(params.Kp) * 4);
  l.h_at = at.take(per * size_t(h_elems(params.Kp, params.Vp)) * 2);
  l.G_at = at.take(p.gate == GateKind::none ? 0 : size_t(p.B * p.T * p.HV * (params.channel ? p.K : 1)) * 4);
  l.scratch_bytes = at.bytes();
  return l;
}

std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l) {
  std::vector<unsigned char> bytes = l.table_bytes();
  if (!l.gamma.empty()) std::memcpy(bytes.data() + l.gamma_at, l.gamma.data(), l.gamma.size() * sizeof(float));
  return bytes;
}

void bind_scratch(ChunkLaunch& l, unsigned char* base) {
  Params& params = l.params;
  l.bind_table(params, base);
  if (!l.gamma.empty()) params.g_gamma = reinterpret_cast<const float*>(base + l.gamma_at);
  params.kd = reinterpret_cast<uint16_t*>(base + l.kd_at);
  params.vb = params.shared_keys ? nullptr : reinterpret_cast<uint16_t*>(base + l.vb_at);
  params.vscale = params.shared_keys ? reinterpret_cast<float*>(base + l.vscale_at) : nullptr;
  params.qb = params.shared_keys ? reinterpret_cast<uint16_t*>(base + l.qb_at) : nullptr;
  params.scores = params.shared_keys ? reinterpret_cast<float*>(base + l.scores_at) : nullptr;
  params.decay = reinterpret_cast<float*>(base + l.decay_at);
  params.h = reinterpret_cast<uint16_t*>(base + l.h_at);
  const bool decays = params.g || params.g_gamma || params.ssd.dt;
  params.G = decays ? reinterpret_cast<float*>(base + l.G_at) : nullptr;
}

}  // namespace cuda_gla_chunk
}  // namespace attnzoo
