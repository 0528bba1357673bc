#include "core/amx.h"
#include "kernels/common/bf16_dot.h"

namespace attnzoo {

void bf16_pair_gemm(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B, size_t ldb,
                    float* C, size_t ldc, bool accumulate) {
  if (amx_bf16_enabled()) return bf16_pair_gemm_amx(M, N, K2, A, lda, B, ldb, C, ldc, accumulate);
  bf16_pair_gemm_dot(M, N, K2, A, lda, B, ldb, C, ldc, accumulate);
}

}  // namespace attnzoo
