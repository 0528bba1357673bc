#pragma once
// The `Tiles` policy of amx_pair_gemm-inl.h on the tile registers themselves. Include only from sources compiled
// for AMX (*_amx.cc, see CMakeLists.txt), and use only where amx_bf16_enabled().
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "core/amx.h"

namespace attnzoo::amx_detail {

// One object per kernel call. ldtilecfg zeroes every tile and costs about as much as a few tile products, so
// configure() loads a shape only when the registers do not hold it already. Nothing is assumed of them when the
// call starts: another library in the same thread (oneDNN, under torch's bf16 matmul and SDPA) loads its own
// configuration and releases the tiles when it is done (tilerelease), after which any tile instruction but
// ldtilecfg is an illegal instruction. So the first configure() reads the configuration in force back (sttilecfg,
// cheap) and compares; later ones within the call compare with the shape this object loaded, since nothing else
// runs on the thread in between. The state stays granted for the thread's life (no tilerelease: the kernel saves
// 8 KiB more at a context switch, cheaper than re-configuring every call).
class TileRegisters {
 public:
  TileRegisters() = default;
  TileRegisters(const TileRegisters&) = delete;
  TileRegisters& operator=(const TileRegisters&) = delete;

  void configure(int r0, int r1) {
    if (r0 == rows0_ && r1 == rows1_) return;
    const AmxTileConfig cfg = amx_2x2_config(r0, r1);
    rows0_ = r0, rows1_ = r1;
    if (!read_back_) {
      read_back_ = true;
      AmxTileConfig now;
      amx_store_tile_config(now);
      if (std::memcmp(&now, &cfg, sizeof cfg) == 0) return;
    }
    amx_load_tile_config(cfg);
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
  void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  // The blocking's four products: C(r, c) += A(r) * B(c) for the 2x2 block.
  template <int Ic, int Ia, int Ib>
  void dp() {
    static_assert(Ia == 4 + Ic / 2 && Ib == 6 + Ic % 2, "C tile 2r+c takes A tile 4+r and B tile 6+c");
    if constexpr (Ic == 0) _tile_dpbf16ps(0, 4, 6);
    if constexpr (Ic == 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (Ic == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (Ic == 3) _tile_dpbf16ps(3, 5, 7);
  }

 private:
  int rows0_ = -1, rows1_ = -1;  // the shape in the registers since this object's first configure()
  bool read_back_ = false;
};

}  // namespace attnzoo::amx_detail
