// The CUDA decode's launches: the kernel instantiation and occupancy its split-KV plan
// (decode_launch_plan.h) is sized by, one stream-ordered upload of the plan's metadata, and the two launches
// (chunks, then the merge of split sequences).
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/decode_cuda.h"
#include "kernels/softmax/cuda/decode_launch_plan.h"
#include "kernels/softmax/cuda/decode_kernel.cuh"

namespace attnzoo {
namespace cuda_decode {

template <class Elem, class KvT, int D, int M>
__global__ void __launch_bounds__(kThreads) decode_kernel(const DecodeParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  decode_chunk<Elem, KvT, D, M>(p, smem);
}

__global__ void __launch_bounds__(kThreads) merge_kernel(const DecodeParams p) {
  switch (p.out_type) {
    case OutType::f32: merge_row<float>(p); break;
    case OutType::bf16: merge_row<__nv_bfloat16>(p); break;
    case OutType::f16: merge_row<__half>(p); break;
  }
}

}  // namespace cuda_decode

namespace {
using namespace cuda_decode;

struct KernelChoice {
  const void* fn;
  int smem_bytes, tile, rows;
};

template <class Elem, class KvT, int D, int M>
KernelChoice choice() {
  using S = ChunkShape<D, M, KvT>;
  return {reinterpret_cast<const void*>(&decode_kernel<Elem, KvT, D, M>), S::kSmemBytes, S::kTile, S::kRows};
}

// The rows_per_cta rule (decode_params.h) as a kernel instantiation.
template <class Elem, class KvT>
KernelChoice choice_for_dim(int64_t D, int64_t rows) {
  const bool small = rows_per_cta(D, rows) == 16;
  switch (D) {
    case 64: return small ? choice<Elem, KvT, 64, 1>() : choice<Elem, KvT, 64, 4>();
    case 96: return choice<Elem, KvT, 96, 1>();
    case 128: return small ? choice<Elem, KvT, 128, 1>() : choice<Elem, KvT, 128, 4>();
    case 256: return choice<Elem, KvT, 256, 4>();
    default: throw ArgumentError("q: head_dim D on CUDA must be 64, 96, 128 or 256, got " + std::to_string(D));
  }
}

template <class Elem>
KernelChoice choice_for_cache(DType kv, int64_t D, int64_t rows) {
  switch (kv) {
    case DType::i8: return choice_for_dim<Elem, int8_t>(D, rows);
    case DType::f8_e4m3: return choice_for_dim<Elem, Fp8Byte>(D, rows);
    default: return choice_for_dim<Elem, Elem>(D, rows);  // check_cuda_decode: a 16-bit cache is q's dtype
  }
}

}  // namespace

PreparedDecodeCuda prepare_attention_decode_cuda(const DecodeProblem& p) {
  const int64_t rows = p.rows();
  const KernelChoice kc = p.q_dtype == DType::bf16 ? choice_for_cache<__nv_bfloat16>(p.kv_dtype, p.D, rows)
                                                    : choice_for_cache<__half>(p.kv_dtype, p.D, rows);

  // Above 48 KB of dynamic shared memory a kernel must opt in; the attribute is per device and cheap to set.
  cuda_check(cudaFuncSetAttribute(kc.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kc.smem_bytes),
        "cudaFuncSetAttribute");
  int device = 0, sms = 0, per_sm = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kc.fn, kThreads, size_t(kc.smem_bytes)),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (per_sm < 1)
    throw DeviceError("CUDA decode: a CTA of " + std::to_string(kc.smem_bytes) + " bytes of shared memory does not fit on " +
                      "this GPU's multiprocessors");
  return {plan_decode_launch(p, kc.tile, kc.rows, int64_t(per_sm) * sms), kc.fn, kc.smem_bytes};
}

void launch_prepared_decode_cuda(const PreparedDecodeCuda& d, const unsigned char* metadata, unsigned char* partials,
                                 const DecodeTensors& t, Stream stream) {
  const DecodeLaunchPlan& plan = d.plan;
  if (plan.work.empty()) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  // The kernels only read the metadata; the params hold it as the plan's own (mutable) buffer would be.
  DecodeParams params = with_tensors(bind_device_buffers(plan, const_cast<unsigned char*>(metadata), partials), t);
  void* args[] = {&params};
  cuda_check(cudaLaunchKernel(d.kernel, dim3(unsigned(plan.work.size()), plan.row_groups), dim3(kThreads), args,
                              size_t(d.smem_bytes), cuda_stream),
             "decode_kernel launch");
  if (!plan.merges.empty()) {
    cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(&merge_kernel),
                                dim3(unsigned(plan.merges.size()), unsigned(params.rows)), dim3(kThreads), args, 0,
                                cuda_stream),
               "merge_kernel launch");
  }
}

void attention_decode_cuda(const DecodeProblem& p, Stream stream) {
  if (p.B == 0) return;
  const PreparedDecodeCuda d = prepare_attention_decode_cuda(p);
  // One allocation: the metadata (uploaded with one copy), then the partial results of split sequences.
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  StreamScratch scratch(d.plan.device_bytes, cuda_stream);
  scratch.upload(d.plan.metadata.data(), d.plan.metadata.size());
  launch_prepared_decode_cuda(d, scratch.data(), scratch.data() + d.plan.metadata.size(), decode_tensors(p), stream);
  scratch.finish();  // ordered after both kernels on the stream
}

}  // namespace attnzoo
