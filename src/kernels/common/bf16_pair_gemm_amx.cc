// bf16_pair_gemm on AMX tiles: the blocking of amx_pair_gemm-inl.h over the tile registers (amx_tile_registers.h).
// Compiled for AMX (see CMakeLists.txt); reached only where amx_bf16_enabled().
#include "core/aligned_buffer.h"
#include "core/amx.h"
#include "kernels/common/amx_pair_gemm-inl.h"
#include "kernels/common/amx_tile_registers.h"
#include "kernels/common/bf16_dot.h"

namespace attnzoo {

void bf16_pair_gemm_amx(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B,
                        size_t ldb, float* C, size_t ldc, bool accumulate) {
  thread_local AlignedBuffer<uint32_t> a_tail, b_tail;
  if (K2 % amx_detail::kTileRows) {
    a_tail.resize(M * amx_detail::kTileRows);
    b_tail.resize(amx_detail::kTileRows * N);
  }
  amx_detail::TileRegisters tiles;
  amx_detail::pair_gemm(tiles, M, N, K2, A, lda, B, ldb, C, ldc, accumulate, a_tail.data(), b_tail.data());
}

}  // namespace attnzoo
