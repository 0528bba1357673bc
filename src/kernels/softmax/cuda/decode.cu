// The CUDA decode's host side: what the kernel refuses, the kernel instantiation and occupancy its split-KV plan
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

std::string str(int64_t v) { return std::to_string(v); }

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// Every row the kernel copies with 16-byte cp.async (and stores in pairs) must start 16-byte aligned: the base
// and each stride it steps over. A stride of a dimension of extent 1 is never stepped over, so it is free.
struct Stride {
  int64_t value;
  bool used;
  const char* what;
};
void check_rows(const char* name, const void* base, DType t, std::initializer_list<Stride> strides) {
  require(reinterpret_cast<uintptr_t>(base) % 16 == 0, name, "data must be 16-byte aligned on CUDA");
  const int64_t unit = 16 / int64_t(dtype_size(t));
  for (const Stride& s : strides)
    require(!s.used || s.value % unit == 0, name, [&] {
      return std::string(s.what) + " stride must be a multiple of " + str(unit) + " elements on CUDA (16-byte " +
             "rows of " + dtype_name(t) + "), got " + str(s.value);
    });
}

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
    case 128: return small ? choice<Elem, KvT, 128, 1>() : choice<Elem, KvT, 128, 4>();
    case 256: return choice<Elem, KvT, 256, 4>();
    default: throw ArgumentError("q: head_dim D on CUDA must be 64, 128 or 256, got " + str(D));
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

void check_cuda_decode(const DecodeProblem& p) {
  if (!is_half(p.q_dtype))
    throw DTypeError(std::string("q: CUDA decode takes bfloat16 or float16, got ") + dtype_name(p.q_dtype));
  if (p.o_dtype != DType::f32 && !is_half(p.o_dtype))
    throw DTypeError(std::string("out: CUDA decode writes float32, bfloat16 or float16, got ") +
                     dtype_name(p.o_dtype));
  if (!is_half(p.kv_dtype) && !is_quantized_kv(p.kv_dtype))
    throw DTypeError(std::string("k_cache: CUDA decode reads bfloat16, float16, int8 or float8_e4m3fn caches, got ") +
                     dtype_name(p.kv_dtype));
  if (is_half(p.kv_dtype) && p.kv_dtype != p.q_dtype)
    throw DTypeError(std::string("k_cache: dtype ") + dtype_name(p.kv_dtype) + " differs from q's " +
                     dtype_name(p.q_dtype) + " (CUDA decode needs them equal, or an int8 / float8_e4m3fn cache)");
  require(p.D == 64 || p.D == 128 || p.D == 256, "q",
          [&] { return "head_dim D on CUDA must be 64, 128 or 256, got " + str(p.D); });
  require(p.Dv == p.D, "v_cache",
          [&] { return "head_dim " + str(p.Dv) + " must equal q's " + str(p.D) + " on CUDA"; });
  require(p.opts.block_mask == nullptr, "block_mask", "not supported on CUDA yet");
  // The merge launches one CTA row per query row (grid y); positions and block rows are int32 in the kernel.
  require(p.rows() <= 65535, "q", [&] {
    return "at most 65535 query rows per kv head (new_tokens x heads per kv head) on CUDA, got " + str(p.rows());
  });
  require(p.block_size <= (int64_t(1) << 30), "k_cache",
          [&] { return "at most 2^30 rows per block (or per sequence) on CUDA, got " + str(p.block_size); });

  check_rows("q", p.q, p.q_dtype,
             {{p.q_batch, p.B > 1, "batch"}, {p.q_token, p.Tq > 1, "token"}, {p.q_head, p.Hq > 1, "head"}});
  check_rows("out", p.o, p.o_dtype,
             {{p.o_batch, p.B > 1, "batch"}, {p.o_token, p.Tq > 1, "token"}, {p.o_head, p.Hq > 1, "head"}});
  const bool many_blocks = p.block_table != nullptr || p.B > 1;
  check_rows("k_cache", p.k, p.kv_dtype,
             {{p.k_block, many_blocks, "block"}, {p.k_token, p.block_size > 1, "token"}, {p.k_head, p.Hkv > 1, "head"}});
  check_rows("v_cache", p.v, p.kv_dtype,
             {{p.v_block, many_blocks, "block"}, {p.v_token, p.block_size > 1, "token"}, {p.v_head, p.Hkv > 1, "head"}});
  if (p.k_scale.data)
    require(reinterpret_cast<uintptr_t>(p.k_scale.data) % 4 == 0, "k_scale", "data must be 4-byte aligned");
  if (p.v_scale.data)
    require(reinterpret_cast<uintptr_t>(p.v_scale.data) % 4 == 0, "v_scale", "data must be 4-byte aligned");
}

void attention_decode_cuda(const DecodeProblem& p, Stream stream) {
  if (p.B == 0) return;
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
    throw DeviceError("CUDA decode: a CTA of " + str(kc.smem_bytes) + " bytes of shared memory does not fit on " +
                      "this GPU's multiprocessors");
  const DecodeLaunchPlan plan = plan_decode_launch(p, kc.tile, kc.rows, int64_t(per_sm) * sms);

  // One allocation: the metadata (uploaded with one copy), then the partial results of split sequences.
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  StreamScratch scratch(plan.device_bytes, cuda_stream);
  DecodeParams params = bind_device_buffer(plan, scratch.data());
  scratch.upload(plan.metadata.data(), plan.metadata.size());
  void* args[] = {&params};
  cuda_check(cudaLaunchKernel(kc.fn, dim3(unsigned(plan.work.size()), plan.row_groups), dim3(kThreads), args,
                              size_t(kc.smem_bytes), cuda_stream),
             "decode_kernel launch");
  if (!plan.merges.empty()) {
    cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(&merge_kernel),
                                dim3(unsigned(plan.merges.size()), unsigned(rows)), dim3(kThreads), args, 0,
                                cuda_stream),
               "merge_kernel launch");
  }
  scratch.finish();  // ordered after both kernels on the stream
}

}  // namespace attnzoo
