#pragma once
// The cuBLASLt half of gemm_cuda (gemm_cublaslt.cc), present only in builds configured with ATTNZOO_CUBLASLT:
// a problem cublaslt_takes, run on `stream` of its device.
#include "core/device.h"
#include "layers/cuda/gemm_cuda.h"

namespace attnzoo {

void cublaslt_gemm(const GemmProblem& p, Stream stream);

}  // namespace attnzoo
