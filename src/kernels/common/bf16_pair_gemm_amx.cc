// bf16_pair_gemm on AMX tiles: the blocking of amx_pair_gemm-inl.h over the tile registers. Compiled for AMX (see
// CMakeLists.txt); reached only where amx_bf16_enabled().
#include <immintrin.h>

#include <cstring>

#include "core/aligned_buffer.h"
#include "core/amx.h"
#include "kernels/common/amx_pair_gemm-inl.h"
#include "kernels/common/bf16_dot.h"

namespace attnzoo {
namespace {

struct TileRegisters {
  // ldtilecfg zeroes every tile and costs about as much as a few tile products, so a thread keeps the shape it
  // configured last when the registers still hold it. They may not: another library in the same thread (oneDNN,
  // under torch's bf16 matmul and SDPA) loads its own configuration and releases the tiles when it is done
  // (tilerelease), after which any tile instruction but ldtilecfg is an illegal instruction. So the configuration
  // in force is read back (sttilecfg, cheap) and compared, never assumed. The state stays granted for the
  // thread's life (no tilerelease: the kernel saves 8 KiB more at a context switch, cheaper than re-configuring
  // every call).
  void configure(int r0, int r1) {
    const AmxTileConfig cfg = amx_2x2_config(r0, r1);
    AmxTileConfig now;
    amx_store_tile_config(now);
    if (std::memcmp(&now, &cfg, sizeof cfg) != 0) amx_load_tile_config(cfg);
  }
  // GCC's tile intrinsics paste the register number into the instruction text, so it must be a literal.
  template <int I>
  void zero() {
    if constexpr (I == 0) _tile_zero(0);
    if constexpr (I == 1) _tile_zero(1);
    if constexpr (I == 2) _tile_zero(2);
    if constexpr (I == 3) _tile_zero(3);
  }
  template <int I>
  void load(const void* p, size_t stride) {
    if constexpr (I == 0) _tile_loadd(0, p, stride);
    if constexpr (I == 1) _tile_loadd(1, p, stride);
    if constexpr (I == 2) _tile_loadd(2, p, stride);
    if constexpr (I == 3) _tile_loadd(3, p, stride);
    if constexpr (I == 4) _tile_loadd(4, p, stride);
    if constexpr (I == 5) _tile_loadd(5, p, stride);
    if constexpr (I == 6) _tile_loadd(6, p, stride);
    if constexpr (I == 7) _tile_loadd(7, p, stride);
  }
  template <int I>
  void store(void* p, size_t stride) {
    if constexpr (I == 0) _tile_stored(0, p, stride);
    if constexpr (I == 1) _tile_stored(1, p, stride);
    if constexpr (I == 2) _tile_stored(2, p, stride);
    if constexpr (I == 3) _tile_stored(3, p, stride);
  }
  // The blocking's four products: C(r, c) += A(r) * B(c) for the 2x2 block.
  template <int Ic, int Ia, int Ib>
  void dp() {
    static_assert(Ia == 4 + Ic / 2 && Ib == 6 + Ic % 2, "C tile 2r+c takes A tile 4+r and B tile 6+c");
    if constexpr (Ic == 0) _tile_dpbf16ps(0, 4, 6);
    if constexpr (Ic == 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (Ic == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (Ic == 3) _tile_dpbf16ps(3, 5, 7);
  }
};

}  // namespace

void bf16_pair_gemm_amx(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B,
                        size_t ldb, float* C, size_t ldc, bool accumulate) {
  thread_local AlignedBuffer<uint32_t> a_tail, b_tail;
  if (K2 % amx_detail::kTileRows) {
    a_tail.resize(M * amx_detail::kTileRows);
    b_tail.resize(amx_detail::kTileRows * N);
  }
  TileRegisters tiles;
  amx_detail::pair_gemm(tiles, M, N, K2, A, lda, B, ldb, C, ldc, accumulate, a_tail.data(), b_tail.data());
}

}  // namespace attnzoo
