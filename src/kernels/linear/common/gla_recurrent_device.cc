// The gated-linear group's one branch to a GPU: run_gla sends device problems of the recurrent path here after
// the device-neutral make_gla_problem, so the CUDA build and the CPU-only one differ in this file alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/common/gla_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#endif

namespace attnzoo {

void gated_linear_recurrent_on_device(const GlaProblem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_gla_recurrent(p);
  const DeviceGuard on(p.device);  // the launchers run on the current device
  const Stream stream = current_stream();
  if (p.check_values) check_gla_values_cuda(p, stream);
  recurrent_gla_cuda(p, stream);
#else
  throw device_unreachable("q", p.device);
#endif
}

}  // namespace attnzoo
