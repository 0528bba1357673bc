// Mamba-2's one branch to a GPU: the recurrent entries (the decode step among them) and the chunked one call
// these for device tensors after the device-neutral make_mamba2_problem, so the CUDA build and the CPU-only one
// differ in this file alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/mamba2/problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/mamba2/cuda/mamba2_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#endif

namespace attnzoo {

void mamba2_recurrent_on_device(const Mamba2Problem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_mamba2_recurrent(p);
  const DeviceGuard on(p.device);  // the launcher runs on the current device
  recurrent_mamba2_cuda(p, current_stream());
#else
  throw device_unreachable("x", p.device);
#endif
}

void mamba2_chunk_on_device(const Mamba2Problem& p) {
#if ATTNZOO_WITH_CUDA
  // State rows wider than the chunked tiles (N > 128, Falcon-H1's 256) take the recurrent kernel: the same
  // function, token by token.
  if (!cuda_mamba2_chunk_fits(p)) return mamba2_recurrent_on_device(p);
  check_cuda_mamba2_chunk(p);
  const DeviceGuard on(p.device);
  chunk_mamba2_cuda(p, current_stream());
#else
  throw device_unreachable("x", p.device);
#endif
}

}  // namespace attnzoo
