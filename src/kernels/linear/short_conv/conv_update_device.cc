// The short convolution's one branch to a GPU: causal_conv1d_update calls this for device tensors after the
// device-neutral make_conv_problem, so the CUDA build and the CPU-only one differ in this file alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/short_conv/conv_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#endif

namespace attnzoo {

void conv_update_on_device(const ConvProblem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_conv_update(p);
  const DeviceGuard on(p.device);  // the launcher runs on the current device
  conv_update_cuda(p, current_stream());
#else
  throw device_unreachable("x", p.device);
#endif
}

}  // namespace attnzoo
