// The CUDA bf16 expansion's launcher (dequant_cuda.h): one kernel per format, the plan from dequant_launch.h, the
// body from dequant_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/cuda/dequant_kernel.cuh"
#include "kernels/quant/cuda/dequant_launch.h"

namespace attnzoo {
namespace cuda_quant {
namespace {

template <QuantType kType>
__global__ void __launch_bounds__(kDequantThreads) quant_dequant_kernel(const DequantParams p) {
  quant_dequant_thread<kType>(p);
}

template <QuantType kType>
void launch(const DequantLaunch& l, cudaStream_t stream) {
  quant_dequant_kernel<kType><<<l.grid, kDequantThreads, 0, stream>>>(l.params);
  cuda_check(cudaGetLastError(), "quant_dequant_kernel launch");
}

}  // namespace
}  // namespace cuda_quant

void quant_dequant_cuda(const QuantDequantProblem& p, Stream stream) {
  using namespace cuda_quant;
  const DequantLaunch l = plan_quant_dequant(p);
  if (l.empty) return;
  const DeviceGuard on(p.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  switch (l.type) {
    case QuantType::Q8_0: return launch<QuantType::Q8_0>(l, s);
    case QuantType::Q4_0: return launch<QuantType::Q4_0>(l, s);
    case QuantType::Q4_1: return launch<QuantType::Q4_1>(l, s);
    case QuantType::Q4_K: return launch<QuantType::Q4_K>(l, s);
    case QuantType::Q5_K: return launch<QuantType::Q5_K>(l, s);
    case QuantType::Q6_K: return launch<QuantType::Q6_K>(l, s);
    default: throw ArgumentError(std::string("w: format ") + quant_type_name(l.type) + " has no CUDA dequantization");
  }
}

}  // namespace attnzoo
