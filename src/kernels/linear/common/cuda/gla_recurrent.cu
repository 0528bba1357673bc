// The CUDA gated linear recurrence's launcher: the upload of host metadata and the launch of the plan
// (gla_recurrent_launch.h, which also holds what the kernel refuses). One kernel per gate kind; dtypes and the
// feature map are run-time (float_elem.cuh).
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_kernel.cuh"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/cuda/value_scan.h"

namespace attnzoo {
namespace cuda_gla {

template <GateKind kGate, int kRows>
__global__ void __launch_bounds__(cuda_linear::bound_threads(kRows), cuda_linear::bound_ctas(kRows))
    gla_recurrent_kernel(const Params p) {
  gla_recurrent_rows<kGate, kRows>(p);
}

template <GateKind kGate>
void launch_rows(const RecurrentLaunch& l, cudaStream_t stream) {
  cuda_linear::with_rows(l.params.rows, [&](auto rows) {
    gla_recurrent_kernel<kGate, decltype(rows)::value><<<l.grid, l.threads, 0, stream>>>(l.params);
  });
}

}  // namespace cuda_gla

using namespace cuda_gla;

void check_gla_values_cuda(const GlaProblem& p, Stream stream) {
  if (p.g_gamma && !p.g_gamma_device.is_cpu())
    require_finite_on_device({{p.g_gamma, DType::f32, p.HV, true, "g_gamma"}}, stream);
}

void recurrent_gla_cuda(const GlaProblem& p, Stream stream) {
  RecurrentLaunch l = plan_gla_recurrent(p);
  if (l.empty) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  auto launch = [&] {
    switch (l.gate) {
      case GateKind::none: launch_rows<GateKind::none>(l, cuda_stream); break;
      case GateKind::scalar: launch_rows<GateKind::scalar>(l, cuda_stream); break;
      case GateKind::channel: launch_rows<GateKind::channel>(l, cuda_stream); break;
    }
    cuda_check(cudaGetLastError(), "gla_recurrent_kernel launch");
  };
  // Host metadata in one upload: packed sequences' offsets, then a host g_gamma.
  const size_t offset_bytes = l.seq_offsets.size() * sizeof(int64_t), gamma_bytes = l.gamma.size() * sizeof(float);
  if (offset_bytes + gamma_bytes == 0) return launch();
  std::vector<unsigned char> host(offset_bytes + gamma_bytes);
  if (offset_bytes) std::memcpy(host.data(), l.seq_offsets.data(), offset_bytes);
  if (gamma_bytes) std::memcpy(host.data() + offset_bytes, l.gamma.data(), gamma_bytes);
  StreamScratch scratch(host.size(), cuda_stream);  // 256-byte aligned: the floats after the int64s stay aligned
  scratch.upload(host.data(), host.size());
  if (offset_bytes) l.params.seq_offsets = reinterpret_cast<const int64_t*>(scratch.data());
  if (gamma_bytes) l.params.g_gamma = reinterpret_cast<const float*>(scratch.data() + offset_bytes);
  launch();
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo
