#pragma once
// AMX (Advanced Matrix Extensions, Intel Xeon from Sapphire Rapids on): eight 1 KiB tile registers and a unit that
// multiplies a 16x32 bf16 tile by a 32x16 bf16 tile into a 16x16 f32 tile per instruction (tdpbf16ps). One
// Emerald Rapids core ran it at 2.2 TFLOP/s, 14x that core's f32 FMA peak and 28x its vdpbf16ps. Linux hands the
// 8 KiB tile state to a process only after it asks (arch_prctl ARCH_REQ_XCOMP_PERM); a tile instruction before
// that kills the process with SIGILL, so every AMX kernel runs behind amx_bf16_enabled().
#include <cstdint>
#include <string>

namespace attnzoo {

struct AmxSupport {
  bool use = false;
  std::string reason;  // for `attnzoo info`
};

// The rule, pure. `cpu`: CPUID says AMX-TILE and AMX-BF16; `os`: XCR0 enables the tile state; `granted`: the
// kernel granted this process the tile data (asked only where cpu and os hold); `env`: ATTNZOO_AMX's value (null
// or empty when unset): "0" turns AMX off, "1" or unset uses it where the three hold. Throws ArgumentError naming
// ATTNZOO_AMX for another value.
AmxSupport amx_rule(bool cpu, bool os, bool granted, const char* env);
// The rule for this process (CPUID, XCR0, the permission request and the environment), decided on first use and
// kept: the request is made once.
const AmxSupport& amx_support();
// AMX bf16 kernels may run: amx_support() and the avx512_bf16 target active (every AMX CPU has AVX-512-BF16;
// forcing a narrower target turns AMX off like every other hand-written path).
bool amx_bf16_enabled();

// The 64-byte operand of ldtilecfg (palette 1): per tile register, its rows and bytes per row. Rows and bytes
// left zero leave that register unconfigured.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  void set(int tile, int nrows, int row_bytes) {
    rows[tile] = uint8_t(nrows);
    bytes_per_row[tile] = uint16_t(row_bytes);
  }
};
static_assert(sizeof(AmxTileConfig) == 64, "ldtilecfg reads exactly 64 bytes");

// The shape of the 2x2 blocking every GEMM here uses: C tiles 0 / 1 and A tile 4 with `rows0` rows, C tiles 2 / 3
// and A tile 5 with `rows1` (0 leaves them unconfigured), B tiles 6 / 7 with 16; every row 64 bytes.
inline AmxTileConfig amx_2x2_config(int rows0, int rows1) {
  AmxTileConfig cfg;
  for (int c : {0, 1, 4}) cfg.set(c, rows0, 64);
  if (rows1)
    for (int c : {2, 3, 5}) cfg.set(c, rows1, 64);
  cfg.set(6, 16, 64);
  cfg.set(7, 16, 64);
  return cfg;
}

// ldtilecfg / sttilecfg on `cfg`. GCC 12's _tile_loadconfig / _tile_storeconfig declare an 8-byte memory operand,
// so the compiler may drop the stores that fill the rest of a configuration (an unconfigured tile then faults with
// SIGILL) or read a stored one's other 56 bytes from before the store; these operands name all 64 bytes. Only
// where amx_bf16_enabled(). sttilecfg stores zeros where the tiles are released (tilerelease, or never configured).
inline void amx_load_tile_config(const AmxTileConfig& cfg) {
#if defined(__x86_64__)
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
#else
  (void)cfg;
#endif
}
inline void amx_store_tile_config(AmxTileConfig& cfg) {
#if defined(__x86_64__)
  __asm__ volatile("sttilecfg %0" : "=m"(cfg));
#else
  (void)cfg;
#endif
}

}  // namespace attnzoo
