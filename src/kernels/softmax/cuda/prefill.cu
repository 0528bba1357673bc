// The CUDA prefill's host side: what the kernel refuses, one stream-ordered upload of the metadata its launch
// plan (prefill_launch_plan.h) lays out, and the launch.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/cuda/prefill_launch_plan.h"
#include "kernels/softmax/cuda/prefill_tile.cuh"

namespace attnzoo {
namespace cuda_prefill {

template <class Elem, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(const PrefillParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  attend_tile<Elem, D>(p, int(blockIdx.x), int(blockIdx.y), smem);
}

}  // namespace cuda_prefill

namespace {
using namespace cuda_prefill;

std::string str(int64_t v) { return std::to_string(v); }

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// 16-byte cp.async loads and paired stores need every row start 16-byte aligned: the base, every sequence's
// offset and both strides (head stride only when there is more than one head to step over).
void check_alignment(const char* name, const void* base, TokenStrides st, int64_t heads,
                     const std::vector<int64_t>& offsets) {
  require(reinterpret_cast<uintptr_t>(base) % 16 == 0, name, "data must be 16-byte aligned on CUDA");
  require(st.token % 8 == 0 && (heads == 1 || st.head % 8 == 0), name, [&] {
    return "token and head strides must be multiples of 8 elements on CUDA (16-byte loads), got token stride " +
           str(st.token) + ", head stride " + str(st.head);
  });
  for (int64_t off : offsets)
    require(off % 8 == 0, name, [&] {
      return "every sequence must start at a multiple of 8 elements on CUDA (batch stride), got offset " + str(off);
    });
}

template <class Elem, int D>
void launch(const PrefillParams& params, int64_t work_items, int64_t Hq, cudaStream_t stream) {
  constexpr int smem = TileShape<D>::kSmemBytes;
  // Above 48 KB of dynamic shared memory a kernel must opt in; the attribute is per device and cheap to set.
  cuda_check(cudaFuncSetAttribute(prefill_kernel<Elem, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        "cudaFuncSetAttribute");
  prefill_kernel<Elem, D><<<dim3(unsigned(work_items), unsigned(Hq)), kThreads, smem, stream>>>(params);
  cuda_check(cudaGetLastError(), "prefill_kernel launch");
}

template <class Elem>
void launch_for_dim(int64_t D, const PrefillParams& params, int64_t work_items, int64_t Hq, cudaStream_t stream) {
  switch (D) {
    case 64: return launch<Elem, 64>(params, work_items, Hq, stream);
    case 128: return launch<Elem, 128>(params, work_items, Hq, stream);
    case 256: return launch<Elem, 256>(params, work_items, Hq, stream);
    default: throw ArgumentError("q: head_dim D on CUDA must be 64, 128 or 256, got " + str(D));
  }
}

}  // namespace

void check_cuda_prefill(const AttentionProblem& p) {
  if (!is_half(p.q_dtype))
    throw DTypeError(std::string("q: CUDA prefill takes bfloat16 or float16, got ") + dtype_name(p.q_dtype));
  if (p.kv_dtype != p.q_dtype)
    throw DTypeError(std::string("k: dtype ") + dtype_name(p.kv_dtype) + " differs from q's " +
                     dtype_name(p.q_dtype) + " (CUDA prefill needs them equal)");
  if (p.o_dtype != DType::f32 && !is_half(p.o_dtype))
    throw DTypeError(std::string("out: CUDA prefill writes float32, bfloat16 or float16, got ") +
                     dtype_name(p.o_dtype));
  require(p.D == 64 || p.D == 128 || p.D == 256, "q",
          [&] { return "head_dim D on CUDA must be 64, 128 or 256, got " + str(p.D); });
  require(p.Dv == p.D, "v", [&] { return "head_dim " + str(p.Dv) + " must equal q's " + str(p.D) + " on CUDA"; });
  require(p.opts.block_mask == nullptr, "block_mask", "not supported on CUDA yet");
  require(p.k_scale.data == nullptr && p.v_scale.data == nullptr, "cache",
          "quantized (int8 / fp8) KV caches are not supported on CUDA yet");
  require(p.Hq <= 65535, "q", [&] { return "at most 65535 heads on CUDA (grid y), got " + str(p.Hq); });

  // Positions are int32 in the kernel; the margin keeps (Tk + Bc - 1) and friends in range.
  constexpr int64_t kMaxTokens = int64_t(1) << 30;
  std::vector<int64_t> q_offsets, k_offsets, v_offsets, o_offsets;
  for (const SeqSpan& s : p.seqs) {
    require(s.blocks == nullptr, "cache", "paged KV caches (block tables) are not supported on CUDA yet");
    require(s.Tk <= kMaxTokens, "k",
            [&] { return "sequences longer than 2^30 keys are not supported, got " + str(s.Tk); });
    if (s.Tq == 0) continue;  // never read
    q_offsets.push_back(s.q_offset);
    k_offsets.push_back(s.k_offset);
    v_offsets.push_back(s.v_offset);
    o_offsets.push_back(s.o_offset);
  }
  if (q_offsets.empty()) return;  // nothing will be launched
  check_alignment("q", p.q, p.qs, p.Hq, q_offsets);
  check_alignment("k", p.k, p.ks, p.Hkv, k_offsets);
  check_alignment("v", p.v, p.vs, p.Hkv, v_offsets);
  check_alignment("out", p.o, p.os, p.Hq, o_offsets);
}

void attention_prefill_cuda(const AttentionProblem& p, Stream stream) {
  require(p.device.is_cuda(), "q", "lives on " + p.device.str() + "; the CUDA prefill needs device memory");
  const PrefillLaunchPlan plan = plan_prefill_launch(p);
  if (plan.work_items == 0) return;

  // One allocation and one copy for everything the kernel reads besides the tensors.
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  StreamScratch scratch(plan.metadata.size(), cuda_stream);
  const PrefillParams params = bind_metadata(plan, scratch.data());
  scratch.upload(plan.metadata.data(), plan.metadata.size());
  if (p.q_dtype == DType::bf16)
    launch_for_dim<__nv_bfloat16>(p.D, params, plan.work_items, p.Hq, cuda_stream);
  else
    launch_for_dim<__half>(p.D, params, plan.work_items, p.Hq, cuda_stream);
  scratch.finish();  // ordered after the kernel on the stream
}

}  // namespace attnzoo
