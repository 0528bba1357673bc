// The Hopper prefill's launch (prefill_sm90_tile.cuh): the sm_80 launcher's metadata upload, the Q / K / V tensor
// maps encoded on the host and passed as __grid_constant__ parameters (TMA reads them from parameter space), a
// persistent grid of at most one CTA per multiprocessor, one kernel per schedule (a template parameter, so the
// static kernel carries none of the dynamic one's drawing and hand-over).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/prefill_sm90_cuda.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#include "kernels/softmax/cuda/prefill_sm90_tile.cuh"

namespace attnzoo {
namespace cuda_prefill {

template <class Elem, int D, PrefillSchedule S>
__global__ void __launch_bounds__(kSm90Threads, 1) prefill_sm90_kernel(const __grid_constant__ PrefillSm90Params params) {
  // wgmma, TMA and setmaxnreg exist on sm_90a only; choose_prefill_path launches this nowhere else.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  attend_tiles_sm90<Elem, D, S>(params, int(blockIdx.x), int(gridDim.x), smem);
#endif
}

}  // namespace cuda_prefill

namespace {
using namespace cuda_prefill;

template <class Elem, int D, PrefillSchedule S>
void launch(const PrefillSm90Params& params, unsigned ctas, cudaStream_t stream) {
  constexpr int smem = int(Sm90Layout<D>::kSmemBytes);
  cuda_check(cudaFuncSetAttribute(prefill_sm90_kernel<Elem, D, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
             "cudaFuncSetAttribute");
  prefill_sm90_kernel<Elem, D, S><<<ctas, kSm90Threads, smem, stream>>>(params);
  cuda_check(cudaGetLastError(), "prefill_sm90_kernel launch");
}

template <class Elem, PrefillSchedule S>
void launch_for_dim(int64_t D, const PrefillSm90Params& params, unsigned ctas, cudaStream_t stream) {
  if (D == 64) launch<Elem, 64, S>(params, ctas, stream);
  else if (D == 128) launch<Elem, 128, S>(params, ctas, stream);
  else launch<Elem, 256, S>(params, ctas, stream);
}

template <class Elem>
void launch_for_schedule(PrefillSchedule schedule, int64_t D, const PrefillSm90Params& params, unsigned ctas,
                         cudaStream_t stream) {
  if (schedule == PrefillSchedule::dynamic) launch_for_dim<Elem, PrefillSchedule::dynamic>(D, params, ctas, stream);
  else launch_for_dim<Elem, PrefillSchedule::static_stride>(D, params, ctas, stream);
}

}  // namespace

void launch_prefill_sm90_cuda(const PrefillSm90Params& params, unsigned ctas, int64_t D, DType dtype,
                              PrefillSchedule schedule, Stream stream) {
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  if (dtype == DType::bf16)
    launch_for_schedule<__nv_bfloat16>(schedule, D, params, ctas, cuda_stream);
  else
    launch_for_schedule<__half>(schedule, D, params, ctas, cuda_stream);
}

}  // namespace attnzoo
