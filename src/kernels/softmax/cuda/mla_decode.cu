// The CUDA MLA decode's launches: the attention kernel's occupancy its split plan (mla_decode_launch_plan.h) is
// sized by (prepare), then absorb, attend, merge (split sequences only) and expand on the caller's stream
// (launch_prepared); mla_decode_cuda does both around one stream-ordered upload of the plan's metadata.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/mla_decode_cuda.h"
#include "kernels/softmax/cuda/mla_decode_kernel.cuh"
#include "kernels/softmax/cuda/mla_decode_launch_plan.h"
#include "kernels/softmax/cuda/mla_decode_mma.cuh"

namespace attnzoo {
namespace cuda_mla {

__global__ void __launch_bounds__(kThreads) absorb_kernel(const MlaDecodeParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  mla_absorb(p, smem);
}

template <int kCols>
__global__ void __launch_bounds__(kThreads) attend_kernel(const MlaDecodeParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  mla_attend<kCols>(p, smem);
}

template <class Elem, int kNB>
__global__ void __launch_bounds__(kThreads) attend_mma_kernel(const MlaDecodeParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  mla_attend_mma<Elem, kNB>(p, smem);
}

__global__ void __launch_bounds__(kThreads) merge_kernel(const MlaDecodeParams p) { mla_merge(p); }

template <bool kWide>
__global__ void __launch_bounds__(kThreads) expand_kernel(const MlaDecodeParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  mla_expand<kWide>(p, smem);
}

}  // namespace cuda_mla

namespace {
using namespace cuda_mla;

const void* attend_for_rank(int64_t r) {
  switch (mla_cols_per_thread(r)) {
    case 1: return reinterpret_cast<const void*>(&attend_kernel<1>);
    case 2: return reinterpret_cast<const void*>(&attend_kernel<2>);
    default: return reinterpret_cast<const void*>(&attend_kernel<4>);
  }
}

template <class Elem>
const void* attend_mma_for_rank(int64_t r) {
  switch (mla_mma_blocks_per_warp(r)) {
    case 2: return reinterpret_cast<const void*>(&attend_mma_kernel<Elem, 2>);
    case 4: return reinterpret_cast<const void*>(&attend_mma_kernel<Elem, 4>);
    case 8: return reinterpret_cast<const void*>(&attend_mma_kernel<Elem, 8>);
    default: return reinterpret_cast<const void*>(&attend_mma_kernel<Elem, 16>);
  }
}

// The plan's rule (plan_mla_decode_launch decides tensor_cores) as an instantiation and its shared memory; ranks
// the tensor cores take are multiples of 64 up to 512, so 2..16 blocks per warp, all even.
struct AttendChoice {
  const void* fn;
  size_t smem;
};
AttendChoice attend_for(const MlaProblem& p, bool tensor_cores) {
  const MlaDims& d = p.dims;
  if (!tensor_cores) return {attend_for_rank(d.r), size_t(mla_attend_smem_bytes(d.latent_dim()))};
  const size_t smem = size_t(mla_attend_mma_smem_bytes(d.latent_dim()));
  if (p.latent_dtype == DType::bf16) return {attend_mma_for_rank<__nv_bfloat16>(d.r), smem};
  return {attend_mma_for_rank<__half>(d.r), smem};
}

void launch(const void* fn, dim3 grid, size_t smem, void** args, cudaStream_t stream, const char* what) {
  if (smem > 48 * 1024)  // above 48 KB a kernel must opt in; the attribute is per device and cheap to set
    cuda_check(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
               "cudaFuncSetAttribute");
  cuda_check(cudaLaunchKernel(fn, grid, dim3(kThreads), args, smem, stream), what);
}

}  // namespace

PreparedMlaDecodeCuda prepare_mla_decode_cuda(const MlaProblem& p) {
  const AttendChoice attend = attend_for(p, mla_uses_tensor_cores(p));  // its occupancy sizes the split
  if (attend.smem > 48 * 1024)
    cuda_check(cudaFuncSetAttribute(attend.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(attend.smem)),
               "cudaFuncSetAttribute");
  int device = 0, sms = 0, per_sm = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attend.fn, kThreads, attend.smem),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (per_sm < 1)
    throw DeviceError("CUDA MLA decode: a CTA of " + std::to_string(attend.smem) +
                      " bytes of shared memory does not fit on this GPU's multiprocessors");
  return {plan_mla_decode_launch(p, int64_t(per_sm) * sms), attend.fn, attend.smem};
}

void launch_prepared_mla_decode_cuda(const PreparedMlaDecodeCuda& d, const unsigned char* metadata,
                                     unsigned char* scratch, const MlaTensors& t, Stream stream) {
  const MlaLaunchPlan& plan = d.plan;
  if (plan.work.empty()) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  MlaDecodeParams params = with_tensors(bind_device_buffers(plan, metadata, scratch), t);
  void* args[] = {&params};
  const unsigned H = unsigned(params.H);
  launch(reinterpret_cast<const void*>(&absorb_kernel), dim3(H, plan.batch_groups),
         size_t(mla_rows_smem_bytes(params.dn)), args, cuda_stream, "mla absorb_kernel launch");
  launch(d.attend, dim3(unsigned(plan.work.size()), plan.head_groups), d.attend_smem, args, cuda_stream,
         "mla attend_kernel launch");
  if (!plan.merges.empty())
    launch(reinterpret_cast<const void*>(&merge_kernel), dim3(unsigned(plan.merges.size()), H), 0, args,
           cuda_stream, "mla merge_kernel launch");
  const void* expand = mla_expand_is_wide(params) ? reinterpret_cast<const void*>(&expand_kernel<true>)
                                                  : reinterpret_cast<const void*>(&expand_kernel<false>);
  launch(expand, dim3(H, plan.batch_groups),
         size_t(mla_rows_smem_bytes(params.r)), args, cuda_stream, "mla expand_kernel launch");
}

void mla_decode_cuda(const MlaProblem& p, Stream stream) {
  if (p.seqs.empty()) return;
  const PreparedMlaDecodeCuda d = prepare_mla_decode_cuda(p);
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  StreamScratch scratch(d.plan.device_bytes, cuda_stream);
  scratch.upload(d.plan.metadata.data(), d.plan.metadata.size());
  launch_prepared_mla_decode_cuda(d, scratch.data(), scratch.data() + d.plan.metadata.size(), mla_tensors(p), stream);
  scratch.finish();  // ordered after the kernels on the stream
}

}  // namespace attnzoo
