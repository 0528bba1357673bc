// The embedding gather's launcher (embedding_cuda.h); the kernel's body is embedding_kernel.cuh.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/embedding_kernel.cuh"

namespace attnzoo {
namespace cuda_embedding {
namespace {

template <QuantType kType, class Out>
__global__ void __launch_bounds__(kThreads) embed_kernel(const EmbedParams<Out> p) {
  gather_rows<kType, Out>(p);
}

template <class Out>
void launch(QuantType type, const EmbedParams<Out>& p, cudaStream_t s) {
  const unsigned grid = grid_for(p.tokens, kWarps);
  switch (type) {
    case QuantType::F32: embed_kernel<QuantType::F32, Out><<<grid, kThreads, 0, s>>>(p); break;
    case QuantType::BF16: embed_kernel<QuantType::BF16, Out><<<grid, kThreads, 0, s>>>(p); break;
    case QuantType::F16: embed_kernel<QuantType::F16, Out><<<grid, kThreads, 0, s>>>(p); break;
    case QuantType::Q8_0: embed_kernel<QuantType::Q8_0, Out><<<grid, kThreads, 0, s>>>(p); break;
    case QuantType::Q4_0: embed_kernel<QuantType::Q4_0, Out><<<grid, kThreads, 0, s>>>(p); break;
    case QuantType::Q4_K: embed_kernel<QuantType::Q4_K, Out><<<grid, kThreads, 0, s>>>(p); break;
    case QuantType::Q6_K: embed_kernel<QuantType::Q6_K, Out><<<grid, kThreads, 0, s>>>(p); break;
    default: throw ArgumentError(std::string("embedding: unexpected table type ") + quant_type_name(type));
  }
  cuda_check(cudaGetLastError(), "embed_kernel launch");
}

}  // namespace
}  // namespace cuda_embedding

void EmbeddingCuda::lookup(const TensorView& ids, const TensorView& out, float scale, bool check_ids,
                           Stream stream) const {
  using namespace cuda_embedding;
  check_embedding_lookup_cuda(table_, device_, ids, out, scale);
  const int64_t T = ids.shape[0];
  if (T == 0) return;
  const DeviceGuard on(device_);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  // One allocation: the status word, then the ids when they come from the host (checked there already).
  const bool host_ids = ids.device.is_cpu();
  StreamScratch scratch(16 + (host_ids ? size_t(T) * sizeof(int32_t) : 0), s);
  auto* first_bad = reinterpret_cast<unsigned long long*>(scratch.data());
  cuda_check(cudaMemsetAsync(first_bad, 0xff, sizeof *first_bad, s), "cudaMemsetAsync");
  const int32_t* dev_ids = static_cast<const int32_t*>(ids.data);
  if (host_ids) {
    cuda_check(cudaMemcpyAsync(scratch.data() + 16, ids.data, size_t(T) * sizeof(int32_t), cudaMemcpyHostToDevice, s),
               "cudaMemcpyAsync");
    dev_ids = reinterpret_cast<const int32_t*>(scratch.data() + 16);
  }
  auto run = [&](auto out_tag) {
    using Out = decltype(out_tag);
    const EmbedParams<Out> p{static_cast<const uint8_t*>(table_.data), table_.row_bytes, table_.rows, table_.cols,
                             dev_ids, T, static_cast<Out*>(out.data), out.strides[0], scale, first_bad};
    launch(table_.type, p, s);
  };
  out.dtype == DType::bf16 ? run(__nv_bfloat16{}) : run(float{});
  if (host_ids || !check_ids) return;
  unsigned long long bad = 0;
  cuda_check(cudaMemcpyAsync(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  scratch.finish();
  cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (bad == ~0ull) return;
  int32_t id = 0;
  cuda_check(cudaMemcpy(&id, dev_ids + bad, sizeof id, cudaMemcpyDeviceToHost), "cudaMemcpy");
  require(false, "ids", [&] {
    return "entry " + std::to_string(bad) + " = " + std::to_string(id) + " is outside the vocabulary [0, " +
           std::to_string(table_.rows) + ")";
  });
}

}  // namespace attnzoo
