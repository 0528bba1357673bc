// The Hopper prefill's launch (prefill_sm90_tile.cuh): the sm_80 launcher's metadata upload, the Q / K / V tensor
// maps encoded on the host and passed as __grid_constant__ parameters (TMA reads them from parameter space), a
// persistent grid of at most one CTA per multiprocessor.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/prefill_sm90_cuda.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#include "kernels/softmax/cuda/prefill_sm90_tile.cuh"

namespace attnzoo {
namespace cuda_prefill {

template <class Elem, int D>
__global__ void __launch_bounds__(kSm90Threads, 1) prefill_sm90_kernel(const __grid_constant__ PrefillSm90Params params) {
  // wgmma, TMA and setmaxnreg exist on sm_90a only; choose_prefill_path launches this nowhere else.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  attend_tiles_sm90<Elem, D>(params, int(blockIdx.x), int(gridDim.x), smem);
#endif
}

}  // namespace cuda_prefill

namespace {
using namespace cuda_prefill;

template <class Elem, int D>
void launch(const PrefillSm90Params& params, unsigned ctas, cudaStream_t stream) {
  constexpr int smem = int(Sm90Layout<D>::kSmemBytes);
  cuda_check(cudaFuncSetAttribute(prefill_sm90_kernel<Elem, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
             "cudaFuncSetAttribute");
  prefill_sm90_kernel<Elem, D><<<ctas, kSm90Threads, smem, stream>>>(params);
  cuda_check(cudaGetLastError(), "prefill_sm90_kernel launch");
}

template <class Elem>
void launch_for_dim(int64_t D, const PrefillSm90Params& params, unsigned ctas, cudaStream_t stream) {
  if (D == 64) launch<Elem, 64>(params, ctas, stream);
  else if (D == 128) launch<Elem, 128>(params, ctas, stream);
  else launch<Elem, 256>(params, ctas, stream);
}

}  // namespace

void launch_prefill_sm90_cuda(const PrefillSm90Params& params, unsigned ctas, int64_t D, DType dtype, Stream stream) {
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  if (dtype == DType::bf16)
    launch_for_dim<__nv_bfloat16>(D, params, ctas, cuda_stream);
  else
    launch_for_dim<__half>(D, params, ctas, cuda_stream);
}

}  // namespace attnzoo
