// The short convolution's prefill branch to a GPU: causal_conv1d calls this for device tensors after the
// device-neutral make_conv_problem, so the CUDA build and the CPU-only one differ in this file (and
// conv_update_device.cc, the decode step's) alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/short_conv/conv_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/short_conv/cuda/conv_prefill_cuda.h"
#endif

namespace attnzoo {

void conv_prefill_on_device(const ConvProblem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_conv_prefill(p);
  const DeviceGuard on(p.device);  // the launcher runs on the current device
  conv_prefill_cuda(p, current_stream());
#else
  throw device_unreachable("x", p.device);
#endif
}

}  // namespace attnzoo
