// The CUDA selective scan's host side: what the kernel refuses, the packed sequences' upload and the launch. One
// kernel per register width of a channel's state (N up to 16, 32 or 64); dtypes are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/cuda/selective_scan_kernel.cuh"

namespace attnzoo {
namespace cuda_mamba {

template <int kPerLane>
__global__ void __launch_bounds__(kThreads) selective_scan_kernel(const Params p) {
  selective_scan_channel<kPerLane>(p);
}

}  // namespace cuda_mamba

namespace {
using namespace cuda_mamba;
using cuda_linear::elem_of;
using cuda_linear::require_aligned;
using cuda_linear::require_grid_fits;

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

void selective_scan_cuda(const SelectiveScanProblem& p, Stream stream) {
  const int64_t N = p.seqs.count();
  if (N == 0 || (p.batch * p.L == 0 && !p.ht)) return;

  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  Params params{};
  params.u = p.u, params.delta = p.delta, params.B = p.Bm, params.C = p.Cm, params.z = p.z, params.out = p.out;
  params.A = p.A_in.data, params.skip = p.skip_in.data, params.delta_bias = p.bias_in.data;
  params.u_t = elem_of(p.u_dtype), params.delta_t = elem_of(p.delta_dtype), params.B_t = elem_of(p.b_dtype);
  params.C_t = elem_of(p.c_dtype), params.z_t = elem_of(p.z_dtype), params.out_t = elem_of(p.out_dtype);
  params.A_t = elem_of(p.A_in.dtype), params.skip_t = elem_of(p.skip_in.dtype);
  params.delta_bias_t = elem_of(p.bias_in.dtype);
  params.initial_state = p.h0;
  params.final_state = p.ht;
  params.L = p.L;
  params.D = int(p.D), params.N = int(p.N), params.G = int(p.G);
  params.channels_per_group = int(p.channels_per_group());
  params.channel_blocks = int((p.D + kChannels - 1) / kChannels);
  params.softplus = p.softplus;

  const dim3 grid(unsigned(ctas(p))), block(kThreads);
  auto launch = [&] {
    if (p.N <= 16) selective_scan_kernel<1><<<grid, block, 0, cuda_stream>>>(params);
    else if (p.N <= 32) selective_scan_kernel<2><<<grid, block, 0, cuda_stream>>>(params);
    else selective_scan_kernel<4><<<grid, block, 0, cuda_stream>>>(params);
    cuda_check(cudaGetLastError(), "selective_scan_kernel launch");
  };
  if (!p.packed) return launch();  // sequence s is batch row s: no metadata
  std::vector<int64_t> offsets(p.seqs.begin.begin(), p.seqs.begin.end());
  offsets.push_back(p.seqs.begin.back() + p.seqs.length.back());  // make_sequence_spans: contiguous spans
  const size_t bytes = offsets.size() * sizeof(int64_t);
  StreamScratch scratch(bytes, cuda_stream);
  scratch.upload(offsets.data(), bytes);
  params.seq_offsets = reinterpret_cast<const int64_t*>(scratch.data());
  launch();
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo
