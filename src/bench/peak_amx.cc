// Compiled for AMX (CMakeLists.txt); reached only when amx_bf16_enabled() said the tiles run in this process.
// The AMX twin of FmaChains: four independent 16 x 16 f32 accumulator tiles (a GEMM's 2x2 block), each tdpbf16ps
// 16 x 16 x 32 bf16 products (16384 flops), over operand tiles loaded once: the instruction's rate, the ceiling a
// GEMM's blocks approach. Tiny operands keep the accumulators finite.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/amx.h"

namespace attnzoo::bench {

float AmxBf16Chains(int64_t iterations, float seed) {
  // Every AMX kernel here loads the configuration it needs when it finds another in force, so this one need not
  // put the previous one back.
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.set(t, 16, 64);
  amx_load_tile_config(cfg);
  alignas(64) uint32_t a[2][16 * 16], b[2][16 * 16];
  alignas(64) float c[16 * 16];
  const uint32_t tiny = 0x33d633d6u;  // a pair of bf16 1e-7
  for (int i = 0; i < 16 * 16; ++i) a[0][i] = a[1][i] = b[0][i] = b[1][i] = tiny;
  for (int i = 0; i < 16 * 16; ++i) c[i] = seed;
  _tile_loadd(0, c, 64);
  _tile_loadd(1, c, 64);
  _tile_loadd(2, c, 64);
  _tile_loadd(3, c, 64);
  _tile_loadd(4, a[0], 64);
  _tile_loadd(5, a[1], 64);
  _tile_loadd(6, b[0], 64);
  _tile_loadd(7, b[1], 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  float sum = 0, out[16 * 16];
  _tile_stored(0, c, 64);
  std::memcpy(out, c, sizeof(out));
  for (float v : out) sum += v;
  _tile_stored(3, c, 64);
  sum += c[0];
  return sum;
}

}  // namespace attnzoo::bench
