// The CUDA quantized GEMV's launcher (gemv_cuda.h): one kernel per format and activation-row bucket, the plan from
// gemv_launch.h, the body from gemv_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/quant/cuda/gemv_cuda.h"
#include "kernels/quant/cuda/gemv_kernel.cuh"
#include "kernels/quant/cuda/gemv_launch.h"

namespace attnzoo {
namespace cuda_quant {
namespace {

template <QuantType kType, int kM>
__global__ void __launch_bounds__(kThreads) quant_gemv_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  quant_gemv_cta<kType, kM>(p, smem);
}

template <QuantType kType, int kM>
void launch(const GemvLaunch& l, cudaStream_t stream) {
  auto kernel = quant_gemv_kernel<kType, kM>;
  // Two tiles of activations (8 KiB a row each) and of weights (up to 64 KiB for bf16, 18 KiB for Q4_0) may pass
  // the 48 KiB default; the quantized formats' one-row kernels, the decode step's usual ones, skip the call.
  if (l.smem_bytes > 48 * 1024)
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.smem_bytes)),
               "cudaFuncSetAttribute(quant_gemv_kernel)");
  kernel<<<l.grid, l.threads, l.smem_bytes, stream>>>(l.params);
  cuda_check(cudaGetLastError(), "quant_gemv_kernel launch");
}

template <QuantType kType>
void launch_rows(const GemvLaunch& l, cudaStream_t stream) {
  switch (l.rows_bucket) {
    case 1: return launch<kType, 1>(l, stream);
    case 2: return launch<kType, 2>(l, stream);
    case 4: return launch<kType, 4>(l, stream);
    default: return launch<kType, 8>(l, stream);
  }
}

}  // namespace
}  // namespace cuda_quant

void quant_gemv_cuda(const QuantGemvProblem& p, Stream stream) {
  using namespace cuda_quant;
  const GemvLaunch l = plan_quant_gemv(p);
  if (l.empty) return;
  const DeviceGuard on(p.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  switch (l.type) {
    case QuantType::BF16: return launch_rows<QuantType::BF16>(l, s);
    case QuantType::F16: return launch_rows<QuantType::F16>(l, s);
    case QuantType::Q8_0: return launch_rows<QuantType::Q8_0>(l, s);
    case QuantType::Q4_0: return launch_rows<QuantType::Q4_0>(l, s);
    case QuantType::Q4_1: return launch_rows<QuantType::Q4_1>(l, s);
    case QuantType::Q4_K: return launch_rows<QuantType::Q4_K>(l, s);
    case QuantType::Q5_K: return launch_rows<QuantType::Q5_K>(l, s);
    case QuantType::Q6_K: return launch_rows<QuantType::Q6_K>(l, s);
    default: throw ArgumentError(std::string("w: format ") + quant_type_name(l.type) + " has no CUDA GEMV");
  }
}

}  // namespace attnzoo
