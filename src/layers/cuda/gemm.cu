// gemm_cuda (gemm_cuda.h): the checks and the backend choice are gemm_checks.cc's, our kernel's body is
// gemm_kernel.cuh, cuBLASLt's call is gemm_cublaslt.cc.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/gemm_cublaslt.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/gemm_kernel.cuh"
#include "layers/cuda/gemm_plan.h"
#include "layers/cuda/tiled_launch.cuh"

namespace attnzoo {
namespace cuda_gemm {
namespace {

template <class Tile, class W>
__global__ void __launch_bounds__(Tile::kThreads) gemm_kernel(const GemmParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  gemm_block<Tile, W>(p, smem);
}

template <class W>
void run(const GemmLaunch& l, cudaStream_t stream) {
  if (l.tile == TileKind::large) launch_tiled<LargeTile>(gemm_kernel<LargeTile, W>, l, stream, "gemm_kernel launch");
  else launch_tiled<SmallTile>(gemm_kernel<SmallTile, W>, l, stream, "gemm_kernel launch");
}

}  // namespace
}  // namespace cuda_gemm

GemmBackend gemm_cuda(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                      const GemmOptions& opts, Stream stream) {
  const GemmProblem p = make_gemm_problem(x, w, bias, y, opts);
  const GemmBackend backend = resolve_gemm_backend(p, opts.backend);
  if (p.M == 0 || p.N == 0) return backend;
  const DeviceGuard on(p.device);
  if (backend == GemmBackend::cublaslt) {
    cublaslt_gemm(p, stream);
    return backend;
  }
  int sm_count = 0;
  cuda_check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, p.device.index),
             "cudaDeviceGetAttribute");
  const cuda_gemm::GemmLaunch l = cuda_gemm::plan_gemm(p, sm_count);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (p.w_dtype == DType::bf16) cuda_gemm::run<__nv_bfloat16>(l, s);
  else cuda_gemm::run<__half>(l, s);
  return GemmBackend::ours;
}

}  // namespace attnzoo
