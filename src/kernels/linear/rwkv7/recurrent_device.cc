// RWKV-7's branches to a GPU: recurrent_rwkv7 (prefill and the decode step) and chunk_rwkv7 (prefill) call these
// for device tensors after the device-neutral make_rwkv7_problem, so the CUDA build and the CPU-only one differ in
// this file alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/rwkv7/problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#endif

namespace attnzoo {

void rwkv7_recurrent_on_device(const Rwkv7Problem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_rwkv7_recurrent(p);
  const DeviceGuard on(p.device);  // the launcher runs on the current device
  recurrent_rwkv7_cuda(p, current_stream());
#else
  throw device_unreachable("r", p.device);
#endif
}

void rwkv7_chunk_on_device(const Rwkv7Problem& p, int64_t chunk_size) {
#if ATTNZOO_WITH_CUDA
  check_cuda_rwkv7_chunk(p, chunk_size);
  const DeviceGuard on(p.device);
  chunk_rwkv7_cuda(p, chunk_size, current_stream());
#else
  (void)chunk_size;
  throw device_unreachable("r", p.device);
#endif
}

}  // namespace attnzoo
