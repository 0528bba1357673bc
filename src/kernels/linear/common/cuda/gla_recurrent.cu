// The CUDA gated linear recurrence's host side: what the kernel refuses, the upload of host metadata and the
// launch. One kernel per gate kind; dtypes and the feature map are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include <climits>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_kernel.cuh"
#include "kernels/linear/common/cuda/value_scan.h"

namespace attnzoo {
namespace cuda_gla {

template <GateKind kGate>
__global__ void __launch_bounds__(kMaxThreads) gla_recurrent_kernel(const Params p) {
  gla_recurrent_cta<kGate>(p);
}

}  // namespace cuda_gla

namespace {
using namespace cuda_gla;
using cuda_linear::elem_of;

std::string str(int64_t v) { return std::to_string(v); }

int64_t ctas(const GlaProblem& p) { return p.seqs.count() * p.HV * ((p.V + kCols - 1) / kCols); }

void require_aligned(const void* data, size_t bytes, const char* name) {
  require(reinterpret_cast<uintptr_t>(data) % bytes == 0, name, [&] {
    return "data must be aligned to its element size (" + str(int64_t(bytes)) + " bytes) on CUDA";
  });
}

}  // namespace

void check_cuda_gla_recurrent(const GlaProblem& p) {
  require(p.K <= kMaxK, "q", [&] {
    return "K=" + str(p.K) + " exceeds " + str(kMaxK) + ", the widest state rows the CUDA recurrence keeps in " +
           "registers";
  });
  for (auto [data, dtype, name] : {std::tuple{p.q, p.q_dtype, "q"}, {p.k, p.k_dtype, "k"}, {p.v, p.v_dtype, "v"},
                                   {p.g, p.g_dtype, "g"}, {static_cast<const void*>(p.o), p.o_dtype, "o"}})
    if (data) require_aligned(data, dtype_size(dtype), name);
  for (auto [data, name] : {std::pair{static_cast<const void*>(p.initial_state), "initial_state"},
                            {p.final_state, "final_state"}, {p.initial_z, "initial_z"}, {p.final_z, "final_z"}})
    if (data) require_aligned(data, sizeof(float), name);
  if (p.g_gamma && !p.g_gamma_device.is_cpu()) require_aligned(p.g_gamma, sizeof(float), "g_gamma");
  require(!p.final_z || p.final_z != p.initial_z, "final_z",
          "must not be initial_z on CUDA: every thread block of a key head reads initial_z, one writes final_z");
  // One CTA per (sequence, value head, 32 columns) on a one-dimensional grid.
  require(ctas(p) <= INT_MAX, "v", [&] {
    return "sequences x value heads x ceil(V / 32) = " + str(ctas(p)) + " thread blocks exceed the grid's 2^31 - 1";
  });
}

void check_gla_values_cuda(const GlaProblem& p, Stream stream) {
  if (p.g_gamma && !p.g_gamma_device.is_cpu())
    require_finite_on_device({{p.g_gamma, DType::f32, p.HV, true, "g_gamma"}}, stream);
}

void recurrent_gla_cuda(const GlaProblem& p, Stream stream) {
  const int64_t N = p.seqs.count();
  const bool writes_state = p.final_state != nullptr || p.final_z != nullptr;
  if (N == 0 || (p.B * p.T == 0 && !writes_state)) return;

  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  Params params{};
  params.q = p.q, params.k = p.k, params.v = p.v, params.g = p.g, params.o = p.o;
  params.q_t = elem_of(p.q_dtype), params.k_t = elem_of(p.k_dtype), params.v_t = elem_of(p.v_dtype);
  params.g_t = elem_of(p.g_dtype), params.o_t = elem_of(p.o_dtype);
  params.g_gamma = p.g_gamma;
  params.initial_state = p.initial_state, params.final_state = p.final_state;
  params.initial_z = p.initial_z, params.final_z = p.final_z;
  params.T = p.T;
  params.H = int(p.H), params.HV = int(p.HV), params.K = int(p.K), params.V = int(p.V);
  params.group = int(p.group());
  params.slices = int((p.V + kCols - 1) / kCols);
  params.scale = p.scale;
  params.feature_map = p.feature_map;
  params.normalize = p.normalize;

  // Host metadata in one upload: packed sequences' offsets (padded batches need none), then a host g_gamma
  // (retention's decays are built on the host per call).
  const std::vector<int64_t> offsets = packed_offsets(p.seqs, p.B, p.T);
  const bool gamma_from_host = p.g_gamma && p.g_gamma_device.is_cpu();
  const size_t offset_bytes = offsets.size() * sizeof(int64_t);
  const size_t gamma_bytes = gamma_from_host ? size_t(p.HV) * sizeof(float) : 0;
  std::vector<unsigned char> host(offset_bytes + gamma_bytes);
  if (offset_bytes) std::memcpy(host.data(), offsets.data(), offset_bytes);
  if (gamma_bytes) std::memcpy(host.data() + offset_bytes, p.g_gamma, gamma_bytes);

  const int warps = int((p.K + kRowsPerThread - 1) / kRowsPerThread);
  const dim3 grid(unsigned(ctas(p))), block(unsigned(warps * 32));
  auto launch = [&] {
    switch (p.gate) {
      case GateKind::none: gla_recurrent_kernel<GateKind::none><<<grid, block, 0, cuda_stream>>>(params); break;
      case GateKind::scalar: gla_recurrent_kernel<GateKind::scalar><<<grid, block, 0, cuda_stream>>>(params); break;
      case GateKind::channel:
        gla_recurrent_kernel<GateKind::channel><<<grid, block, 0, cuda_stream>>>(params);
        break;
    }
    cuda_check(cudaGetLastError(), "gla_recurrent_kernel launch");
  };
  if (host.empty()) return launch();
  StreamScratch scratch(host.size(), cuda_stream);  // 256-byte aligned: the floats after the int64s stay aligned
  scratch.upload(host.data(), host.size());
  if (offset_bytes) params.seq_offsets = reinterpret_cast<const int64_t*>(scratch.data());
  if (gamma_bytes) params.g_gamma = reinterpret_cast<const float*>(scratch.data() + offset_bytes);
  launch();
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo
