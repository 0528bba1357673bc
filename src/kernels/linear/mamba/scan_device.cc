// Mamba's one branch to a GPU: the scan and decode-step entries call this for device tensors after the
// device-neutral make_selective_scan_problem, so the CUDA build and the CPU-only one differ in this file alone.
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/mamba/problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#endif

namespace attnzoo {

void selective_scan_on_device(const SelectiveScanProblem& p) {
#if ATTNZOO_WITH_CUDA
  check_cuda_selective_scan(p);
  const DeviceGuard on(p.device);  // the launcher runs on the current device
  selective_scan_cuda(p, current_stream());
#else
  throw device_unreachable("u", p.device);
#endif
}

}  // namespace attnzoo
