// The softmax entry points that also run on a GPU: each validates on the host (shapes, strides, lengths, block
// tables and options are host metadata on every device), then branches once on where the tensors live.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/mla_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/softmax/cuda/decode_cuda.h"
#include "kernels/softmax/cuda/mla_decode_cuda.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#endif

namespace attnzoo {
void attention_prefill(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                       const AttentionOptions& opts, const VarlenInfo& varlen) {
  attention_prefill(make_prefill_problem(q, k, v, out, opts, varlen));
}

void attention_prefill(const AttentionProblem& p) {
  if (p.device.is_cpu()) return attention_prefill_run(p);
#if ATTNZOO_WITH_CUDA
  check_cuda_prefill(p);
  const DeviceGuard on(p.device);  // the launchers run on the current device
  attention_prefill_cuda(p, current_stream());
#else
  throw device_unreachable("q", p.device);
#endif
}

void attention_prefill(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                       const AttentionOptions& opts, const VarlenInfo& varlen) {
  attention_prefill_run(make_cached_prefill_problem(q, cache, out, opts, varlen));
}

void attention_decode(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                      const AttentionOptions& opts) {
  attention_decode(make_decode_problem(q, cache, out, opts));
}

void attention_decode(const DecodeProblem& p) {
  if (p.device.is_cpu()) return attention_decode_run(p);
#if ATTNZOO_WITH_CUDA
  check_cuda_decode(p);
  const DeviceGuard on(p.device);
  attention_decode_cuda(p, current_stream());
#else
  throw device_unreachable("q", p.device);
#endif
}

void mla_decode(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen) {
  const MlaProblem p = make_mla_cache_problem(q, cache, weights, out, opts, varlen, /*any_device=*/true);
  if (p.device.is_cpu()) return mla_run_absorbed(p);
#if ATTNZOO_WITH_CUDA
  check_cuda_mla_decode(p, varlen.cu_seqlens_q != nullptr);
  const DeviceGuard on(p.device);
  mla_decode_cuda(p, current_stream());
#else
  throw device_unreachable("q", p.device);
#endif
}

}  // namespace attnzoo
