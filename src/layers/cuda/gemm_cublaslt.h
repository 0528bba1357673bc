#pragma once
// The cuBLASLt half of gemm_cuda (gemm_cublaslt.cc, the only file compiled with ATTNZOO_WITH_CUBLASLT where the
// configure step found cuBLASLt): a problem cublaslt_takes, run on `stream` of its device (the current one).
// Without cuBLASLt it throws DeviceError; resolve_gemm_backend never picks it then.
#include "core/device.h"
#include "layers/cuda/gemm_cuda.h"

namespace attnzoo {

void cublaslt_gemm(const GemmProblem& p, Stream stream);

}  // namespace attnzoo
