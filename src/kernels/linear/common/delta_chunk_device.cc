// The chunked delta family's branch to a GPU: chunk_gated_delta_rule (and chunk_delta_rule through it) and
// chunk_kda call this for device tensors after the device-neutral make_delta_problem, so the CUDA build and the CPU-only one differ
// in this file alone (as delta_recurrent_device.cc does for the recurrent entries).
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/common/delta_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#endif

namespace attnzoo {

void chunk_delta_on_device(const DeltaProblem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_delta_chunk(p);
  const DeviceGuard on(p.device);  // the launchers run on the current device
  const Stream stream = current_stream();
  if (p.check_values) check_delta_values_cuda(p, stream);
  chunk_delta_cuda(p, stream);
#else
  throw device_unreachable("q", p.device);
#endif
}

}  // namespace attnzoo
