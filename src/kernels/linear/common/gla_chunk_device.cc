// The chunked gated-linear entries' branch to a GPU: run_gla sends device problems of the chunked path here
// after the device-neutral make_gla_problem, so the CUDA build and the CPU-only one differ in this file alone
// (as gla_recurrent_device.cc does for the recurrent entries).
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/common/gla_problem.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#endif

namespace attnzoo {

void gated_linear_chunk_on_device(const GlaProblem& p) {
#if ATTNZOO_WITH_CUDA
  // Linear attention's normaliser rides in an extra state column the chunked tiles have no room for; the
  // recurrent kernel computes the same function.
  if (p.normalize) return gated_linear_recurrent_on_device(p);
  check_cuda_gla_chunk(p);
  const DeviceGuard on(p.device);  // the launchers run on the current device
  const Stream stream = current_stream();
  if (p.check_values) check_gla_values_cuda(p, stream);
  chunk_gla_cuda(p, stream);
#else
  throw device_unreachable("q", p.device);
#endif
}

}  // namespace attnzoo
