#include "kernels/linear/mamba/cuda/selective_scan_launch.h"

#include <iterator>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;
using namespace cuda_mamba;

std::string str(int64_t v) { return std::to_string(v); }

int64_t ctas(const SelectiveScanProblem& p) { return p.seqs.count() * ((p.D + kChannels - 1) / kChannels); }

}  // namespace

void check_cuda_selective_scan(const SelectiveScanProblem& p) {
  require(p.N <= kMaxN, "A", [&] {
    return "state size N=" + str(p.N) + " exceeds " + str(kMaxN) + ", the widest channel state the CUDA scan " +
           "keeps in registers";
  });
  const std::pair<const void*, DType> data[] = {{p.u, p.u_dtype},    {p.delta, p.delta_dtype}, {p.Bm, p.b_dtype},
                                                {p.Cm, p.c_dtype},   {p.z, p.z_dtype},         {p.out, p.out_dtype},
                                                {p.A_in.data, p.A_in.dtype}, {p.skip_in.data, p.skip_in.dtype},
                                                {p.bias_in.data, p.bias_in.dtype}};
  const char* names[] = {"u", "delta", "B", "C", "z", "out", "A", "D", "delta_bias"};
  for (size_t i = 0; i < std::size(data); ++i)
    if (data[i].first) require_aligned(data[i].first, dtype_size(data[i].second), names[i]);
  if (p.h0) require_aligned(p.h0, sizeof(float), "initial_state");
  if (p.ht) require_aligned(p.ht, sizeof(float), "final_state");
  // One CTA per (sequence, 8 channels) on a one-dimensional grid.
  require_grid_fits(ctas(p), "u", "sequences x ceil(D / 8)");
}

namespace cuda_mamba {

ScanLaunch plan_selective_scan(const SelectiveScanProblem& p) {
  ScanLaunch l;
  const int64_t N = p.seqs.count();
  if (N == 0 || (p.batch * p.L == 0 && !p.ht)) return l;
  l.empty = false;
  l.per_lane = p.N <= 16 ? 1 : p.N <= 32 ? 2 : p.N <= 64 ? 4 : p.N <= 128 ? 8 : 16;

  Params& params = l.params;
  params.u = p.u, params.delta = p.delta, params.B = p.Bm, params.C = p.Cm, params.z = p.z, params.out = p.out;
  params.A = p.A_in.data, params.skip = p.skip_in.data, params.delta_bias = p.bias_in.data;
  params.u_t = elem_of(p.u_dtype), params.delta_t = elem_of(p.delta_dtype), params.B_t = elem_of(p.b_dtype);
  params.C_t = elem_of(p.c_dtype), params.z_t = elem_of(p.z_dtype), params.out_t = elem_of(p.out_dtype);
  params.A_t = elem_of(p.A_in.dtype), params.skip_t = elem_of(p.skip_in.dtype);
  params.delta_bias_t = elem_of(p.bias_in.dtype);
  params.initial_state = p.h0;
  params.final_state = p.ht;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_stride;
  params.L = p.L;
  params.D = int(p.D), params.N = int(p.N), params.G = int(p.G);
  params.channels_per_group = int(p.channels_per_group());
  params.channel_blocks = int((p.D + kChannels - 1) / kChannels);
  params.softplus = p.softplus;

  l.grid = unsigned(ctas(p));
  l.threads = unsigned(kThreads);
  if (!p.packed) return l;  // sequence s is batch row s: no metadata
  l.seq_offsets.assign(p.seqs.begin.begin(), p.seqs.begin.end());
  l.seq_offsets.push_back(p.seqs.begin.back() + p.seqs.length.back());  // make_sequence_spans: contiguous spans
  return l;
}

}  // namespace cuda_mamba
}  // namespace attnzoo
