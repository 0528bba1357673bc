#include "kernels/linear/common/cuda/delta_chunk_launch.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/launch_checks.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_delta_chunk;

std::string str(int64_t v) { return std::to_string(v); }

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int64_t chunk_count(const DeltaProblem& p) {
  int64_t n = 0;
  for (int64_t len : p.seqs.length) n += (len + p.chunk_size - 1) / p.chunk_size;
  return n;
}

}  // namespace

void check_cuda_delta_chunk(const DeltaProblem& p) {
  require(p.K <= kMaxDim, "q", [&] {
    return "K=" + str(p.K) + " exceeds " + str(kMaxDim) + ", the widest keys the CUDA chunked kernels stage";
  });
  require(p.V <= kMaxDim, "v", [&] {
    return "V=" + str(p.V) + " exceeds " + str(kMaxDim) + ", the widest values the CUDA chunked kernels stage";
  });
  require(p.chunk_size <= 64, "chunk_size", [&] {
    return "the CUDA chunked kernels run chunks of 16, 32 or 64 tokens, got " + str(p.chunk_size);
  });
  for (auto [t, name] : {std::pair{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.g, "g"}, {&p.beta, "beta"},
                         {&p.o, "o"}})
    if (!t->empty()) require_aligned(t->data, dtype_size(t->dtype), name);
  if (p.initial_state) require_aligned(p.initial_state, sizeof(float), "initial_state");
  if (p.final_state) require_aligned(p.final_state, sizeof(float), "final_state");
  require_grid_fits(chunk_count(p) * p.HV, "q", "chunks x value heads");
  require_grid_fits(p.seqs.count() * p.HV * (round_up(p.V, kStateCols) / kStateCols), "v",
                    "sequences x value heads x ceil(V / 32)");
}

namespace cuda_delta_chunk {

ChunkLaunch plan_delta_chunk(const DeltaProblem& p) {
  ChunkLaunch l;
  const int64_t N = p.seqs.count();
  if (N == 0 || (p.B * p.T == 0 && !p.final_state)) return l;
  l.empty = false;
  const int C = int(p.chunk_size);
  l.C = C;

  // Chunks never cross sequences; a sequence's last chunk may be short, an empty sequence has none.
  l.seq_chunks.reserve(size_t(N) + 1);
  for (int64_t n = 0; n < N; ++n) {
    l.seq_chunks.push_back(int32_t(l.chunks.size()));
    const int64_t begin = p.seqs.begin[size_t(n)], len = p.seqs.length[size_t(n)];
    for (int64_t t0 = 0; t0 < len; t0 += C)
      l.chunks.push_back({begin + t0, int32_t(n), int32_t(std::min<int64_t>(C, len - t0))});
  }
  l.seq_chunks.push_back(int32_t(l.chunks.size()));
  const int64_t NC = int64_t(l.chunks.size());

  Params& params = l.params;
  params.q = p.q.data, params.k = p.k.data, params.v = p.v.data, params.beta = p.beta.data;
  params.g = p.gate == DeltaGate::none ? nullptr : p.g.data;
  params.o = p.o.data;
  params.q_t = elem_of(p.q.dtype), params.k_t = elem_of(p.k.dtype), params.v_t = elem_of(p.v.dtype);
  params.g_t = elem_of(p.g.dtype), params.beta_t = elem_of(p.beta.dtype), params.o_t = elem_of(p.o.dtype);
  params.initial_state = p.initial_state;
  params.final_state = p.final_state;
  params.n_chunks = NC;
  params.H = int(p.H), params.HV = int(p.HV), params.K = int(p.K), params.V = int(p.V);
  params.Kp = int(round_up(p.K, 16)), params.Vp = int(round_up(p.V, kStateCols));
  params.group = int(p.group());
  params.scale = p.scale;
  params.l2norm = p.l2norm;
  params.channel = p.gate == DeltaGate::channel;

  l.intra_grid = unsigned(NC * p.HV);
  l.output_grid = l.intra_grid;
  l.state_grid = unsigned(N * p.HV * (params.Vp / kStateCols));
  l.intra_smem = IntraSmem(C, params.Kp, params.Vp, params.channel).bytes;
  l.state_smem = StateSmem(C, params.Kp).bytes;
  l.output_smem = OutputSmem(C, params.Kp, params.Vp, params.channel).bytes;

  // One allocation: the metadata first (uploaded), then the scratch, every piece 256-byte aligned.
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at = (at + bytes + 255) / 256 * 256;
    return here;
  };
  const size_t per = size_t(NC * p.HV);
  l.chunks_at = take(l.chunks.size() * sizeof(ChunkDesc));
  l.seq_chunks_at = take(l.seq_chunks.size() * sizeof(int32_t));
  l.metadata_bytes = at;
  l.w_at = take(per * size_t(w_elems(C, params.Kp)) * 2);
  l.kd_at = take(per * size_t(w_elems(C, params.Kp)) * 2);
  l.u_at = take(per * size_t(u_elems(C, params.Vp)) * 4);
  l.vnew_at = take(per * size_t(u_elems(C, params.Vp)) * 2);
  l.h_at = take(per * size_t(h_elems(params.Kp, params.Vp)) * 2);
  l.G_at = take(p.gate == DeltaGate::none ? 0 : size_t(p.B * p.T * p.HV * (params.channel ? p.K : 1)) * 4);
  l.scratch_bytes = std::max<size_t>(at, 256);
  return l;
}

std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l) {
  std::vector<unsigned char> bytes(l.metadata_bytes, 0);
  if (!l.chunks.empty()) std::memcpy(bytes.data() + l.chunks_at, l.chunks.data(), l.chunks.size() * sizeof(ChunkDesc));
  std::memcpy(bytes.data() + l.seq_chunks_at, l.seq_chunks.data(), l.seq_chunks.size() * sizeof(int32_t));
  return bytes;
}

void bind_scratch(ChunkLaunch& l, unsigned char* base) {
  Params& params = l.params;
  params.chunks = reinterpret_cast<const ChunkDesc*>(base + l.chunks_at);
  params.seq_chunks = reinterpret_cast<const int32_t*>(base + l.seq_chunks_at);
  params.w = reinterpret_cast<uint16_t*>(base + l.w_at);
  params.kd = reinterpret_cast<uint16_t*>(base + l.kd_at);
  params.u = reinterpret_cast<float*>(base + l.u_at);
  params.vnew = reinterpret_cast<uint16_t*>(base + l.vnew_at);
  params.h = reinterpret_cast<uint16_t*>(base + l.h_at);
  params.G = params.g ? reinterpret_cast<float*>(base + l.G_at) : nullptr;
}

}  // namespace cuda_delta_chunk
}  // namespace attnzoo
