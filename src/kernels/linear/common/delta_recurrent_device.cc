// The delta family's one branch to a GPU: the recurrent entries call this for device tensors after the
// device-neutral make_delta_problem, so the CUDA build and the CPU-only one differ in this file alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/common/delta_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#endif

namespace attnzoo {

void recurrent_delta_on_device(const DeltaProblem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_delta_recurrent(p);
  const DeviceGuard on(p.device);  // the launchers run on the current device
  const Stream stream = current_stream();
  if (p.check_values) check_delta_values_cuda(p, stream);
  recurrent_delta_cuda(p, stream);
#else
  throw device_unreachable("q", p.device);
#endif
}

}  // namespace attnzoo
