// The paged KV-cache write's launcher (kv_write_cuda.h); the kernel's body is kv_write_kernel.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/cuda/kv_write_kernel.cuh"

namespace attnzoo {
namespace cuda_kv_write {
namespace {

template <class Src, class Dst>
__global__ void __launch_bounds__(kThreads) kv_write_kernel(const KvWriteParams<Src, Dst> p) {
  write_rows(p);
}

__global__ void __launch_bounds__(kThreads)
    bad_slot_kernel(const int64_t* slot_mapping, int64_t tokens, int64_t num_slots, unsigned long long* first_bad) {
  find_bad_slot(slot_mapping, tokens, num_slots, first_bad);
}

template <class Fn>
void with_row_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(__nv_bfloat16{});
    case DType::f16: return fn(__half{});
    default: throw DTypeError(std::string("kv write: unexpected row dtype ") + dtype_name(t));
  }
}

template <class Fn>
void with_cache_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::i8: return fn(int8_t{});
    case DType::f8_e4m3: return fn(Fp8E4M3{});
    default: return with_row_type(t, fn);
  }
}

void check_slots(const int64_t* slot_mapping, int64_t tokens, int64_t num_slots, cudaStream_t s) {
  unsigned long long first_bad = 0;
  {
    StreamScratch scratch(sizeof first_bad, s);
    auto* flag = reinterpret_cast<unsigned long long*>(scratch.data());
    cuda_check(cudaMemsetAsync(flag, 0xff, sizeof first_bad, s), "cudaMemsetAsync");
    bad_slot_kernel<<<grid_for(tokens, kThreads), kThreads, 0, s>>>(slot_mapping, tokens, num_slots, flag);
    cuda_check(cudaGetLastError(), "bad_slot_kernel launch");
    cuda_check(cudaMemcpyAsync(&first_bad, flag, sizeof first_bad, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    scratch.finish();
    cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  if (first_bad == ~0ull) return;
  int64_t slot = 0;
  cuda_check(cudaMemcpy(&slot, slot_mapping + first_bad, sizeof slot, cudaMemcpyDeviceToHost), "cudaMemcpy");
  require(false, "slot_mapping", [&] {
    return "entry " + std::to_string(first_bad) + " = " + std::to_string(slot) + " is past the cache's " +
           std::to_string(num_slots) + " slots (num_blocks * block_size)";
  });
}

void launch(const PagedRowsCuda& w, const int64_t* slot_mapping, cudaStream_t s) {
  const TensorView &rows = w.rows, &cache = w.cache, &scale = w.scale;
  const bool heads = rows.ndim == 3;
  with_row_type(rows.dtype, [&](auto src_tag) {
    with_cache_type(cache.dtype, [&](auto dst_tag) {
      using Src = decltype(src_tag);
      using Dst = decltype(dst_tag);
      KvWriteParams<Src, Dst> p{};
      p.rows = static_cast<const Src*>(rows.data);
      p.row_token = rows.strides[0];
      p.row_head = heads ? rows.strides[1] : 0;
      p.cache = static_cast<Dst*>(cache.data);
      p.cache_block = cache.strides[0];
      p.cache_slot = cache.strides[1];
      p.cache_head = heads ? cache.strides[2] : 0;
      if (scale.data) {
        p.scale = static_cast<float*>(scale.data);
        p.scale_block = scale.strides[0];
        p.scale_slot = scale.strides[1];
        p.scale_head = heads ? scale.strides[2] : 0;
      }
      p.slot_mapping = slot_mapping;
      p.tokens = rows.shape[0];
      p.heads = heads ? rows.shape[1] : 1;
      p.dim = rows.shape[rows.ndim - 1];
      p.block_size = cache.shape[1];
      p.num_slots = cache.shape[0] * cache.shape[1];
      kv_write_kernel<Src, Dst><<<grid_for(p.tokens * p.heads, kWarps), kThreads, 0, s>>>(p);
      cuda_check(cudaGetLastError(), "kv_write_kernel launch");
    });
  });
}

}  // namespace
}  // namespace cuda_kv_write

void write_paged_rows_cuda(std::span<const PagedRowsCuda> writes, const int64_t* slot_mapping, bool check_slots,
                           Stream stream) {
  using namespace cuda_kv_write;
  if (writes.empty() || writes[0].rows.shape[0] == 0) return;
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (check_slots) {
    int64_t num_slots = INT64_MAX;
    for (const PagedRowsCuda& w : writes) num_slots = std::min(num_slots, w.cache.shape[0] * w.cache.shape[1]);
    cuda_kv_write::check_slots(slot_mapping, writes[0].rows.shape[0], num_slots, s);
  }
  for (const PagedRowsCuda& w : writes)
    if (w.rows.numel() > 0) launch(w, slot_mapping, s);
}

}  // namespace attnzoo
