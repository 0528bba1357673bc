// The CUDA recurrence's host side: what the kernel refuses, the sequences' upload and the launch. One kernel per
// gate kind; dtypes are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include <climits>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_kernel.cuh"

namespace attnzoo {
namespace cuda_delta {

template <DeltaGate kGate>
__global__ void __launch_bounds__(kMaxThreads) delta_recurrent_kernel(const Params p) {
  delta_recurrent_cta<kGate>(p);
}

}  // namespace cuda_delta

namespace {
using namespace cuda_delta;
using cuda_linear::elem_of;

std::string str(int64_t v) { return std::to_string(v); }

int64_t ctas(const DeltaProblem& p) { return p.seqs.count() * p.HV * ((p.V + kCols - 1) / kCols); }

void require_aligned(const void* data, size_t bytes, const char* name) {
  require(reinterpret_cast<uintptr_t>(data) % bytes == 0, name, [&] {
    return "data must be aligned to its element size (" + str(int64_t(bytes)) + " bytes) on CUDA";
  });
}

}  // namespace

void check_cuda_delta_recurrent(const DeltaProblem& p) {
  require(p.K <= kMaxK, "q", [&] {
    return "K=" + str(p.K) + " exceeds " + str(kMaxK) + ", the widest state rows the CUDA recurrence keeps in " +
           "registers";
  });
  for (auto [t, name] : {std::pair{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.g, "g"}, {&p.beta, "beta"},
                         {&p.o, "o"}})
    if (!t->empty()) require_aligned(t->data, dtype_size(t->dtype), name);
  if (p.initial_state) require_aligned(p.initial_state, sizeof(float), "initial_state");
  if (p.final_state) require_aligned(p.final_state, sizeof(float), "final_state");
  // One CTA per (sequence, value head, 32 columns) on a one-dimensional grid.
  require(ctas(p) <= INT_MAX, "v", [&] {
    return "sequences x value heads x ceil(V / 32) = " + str(ctas(p)) + " thread blocks exceed the grid's 2^31 - 1";
  });
}

void recurrent_delta_cuda(const DeltaProblem& p, Stream stream) {
  const int64_t N = p.seqs.count();
  const bool writes_state = p.final_state != nullptr;
  if (N == 0 || (p.B * p.T == 0 && !writes_state)) return;

  // Padded batches need no metadata; packed ones upload their offsets.
  const std::vector<int64_t> offsets = packed_offsets(p.seqs, p.B, p.T);

  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  Params params{};
  params.q = p.q.data, params.k = p.k.data, params.v = p.v.data, params.g = p.g.data, params.beta = p.beta.data;
  params.o = p.o.data;
  params.q_t = elem_of(p.q.dtype), params.k_t = elem_of(p.k.dtype), params.v_t = elem_of(p.v.dtype);
  params.g_t = elem_of(p.g.dtype), params.beta_t = elem_of(p.beta.dtype), params.o_t = elem_of(p.o.dtype);
  params.initial_state = p.initial_state;
  params.final_state = p.final_state;
  params.T = p.T;
  params.H = int(p.H), params.HV = int(p.HV), params.K = int(p.K), params.V = int(p.V);
  params.group = int(p.group());
  params.slices = int((p.V + kCols - 1) / kCols);
  params.scale = p.scale;
  params.l2norm = p.l2norm;

  const int warps = int((p.K + kRowsPerThread - 1) / kRowsPerThread);
  const dim3 grid(unsigned(ctas(p))), block(unsigned(warps * 32));
  auto launch = [&] {
    switch (p.gate) {
      case DeltaGate::none: delta_recurrent_kernel<DeltaGate::none><<<grid, block, 0, cuda_stream>>>(params); break;
      case DeltaGate::head: delta_recurrent_kernel<DeltaGate::head><<<grid, block, 0, cuda_stream>>>(params); break;
      case DeltaGate::channel:
        delta_recurrent_kernel<DeltaGate::channel><<<grid, block, 0, cuda_stream>>>(params);
        break;
    }
    cuda_check(cudaGetLastError(), "delta_recurrent_kernel launch");
  };
  if (offsets.empty()) return launch();
  const size_t bytes = offsets.size() * sizeof(int64_t);
  StreamScratch scratch(bytes, cuda_stream);
  scratch.upload(offsets.data(), bytes);
  params.seq_offsets = reinterpret_cast<const int64_t*>(scratch.data());
  launch();
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo
