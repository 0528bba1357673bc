// linear_amx_gemm.h on the tile registers. Compiled for AMX (see CMakeLists.txt); reached only where
// amx_bf16_enabled().
//
// bf16_pair_gemm's tile loop (amx_pair_gemm-inl.h's block_2x2) with W's rows as A and a 32-token group as B:
// C 0..3 a 2x2 block of 16 x 16 f32 (32 rows of W x 32 tokens). Unlike a bf16_pair_gemm call per reduction
// block, C stays in the tiles for the whole reduction (no round trip through memory between blocks), starts from
// the bias broadcast along the tokens and is stored once, to a 4 KiB buffer that is transposed into y.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/amx.h"
#include "kernels/common/amx_pair_gemm-inl.h"
#include "kernels/common/amx_tile_registers.h"
#include "kernels/common/bf16_dot.h"
#include "layers/linear_amx_gemm.h"

namespace attnzoo {
namespace {

constexpr size_t kGroup = kAmxTokenGroup;

// y[t][r] = stage[r][t] for r < rows, t < tokens: each token's 16-row halves gathered down a column of stage.
void transpose_out(const float* stage, size_t rows, size_t tokens, float* y, size_t ldy) {
  const __m512i column = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(int(kGroup)));
  const __mmask16 m0 = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  const __mmask16 m1 = rows <= 16 ? __mmask16(0) : rows >= 32 ? __mmask16(0xffff) : __mmask16((1u << (rows - 16)) - 1);
  for (size_t t = 0; t < tokens; ++t) {
    float* yt = y + t * ldy;
    _mm512_mask_storeu_ps(yt, m0, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m0, column, stage + t, 4));
    if (m1)
      _mm512_mask_storeu_ps(yt + 16, m1,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m1, column, stage + 16 * kGroup + t, 4));
  }
}

}  // namespace

void amx_transpose_activations(const uint32_t* x, size_t T, size_t K2, uint32_t* dst) {
  const size_t K2p = amx_padded_pairs(K2);
  for (size_t g = 0; g < amx_token_groups(T); ++g) {
    uint32_t* out = dst + g * K2p * kGroup;
    const size_t tokens = std::min(kGroup, T - g * kGroup);
    // transpose_pairs zero-pads each row to 16 tokens; a group of 16 or fewer leaves the other half to clear.
    if (tokens <= 16)
      for (size_t k = 0; k < K2; ++k) std::memset(out + k * kGroup + 16, 0, 16 * 4);
    transpose_pairs(x + g * kGroup * K2, K2, tokens, K2, out, kGroup);
    std::memset(out + K2 * kGroup, 0, (K2p - K2) * kGroup * 4);
  }
}

void amx_linear_rows(const uint32_t* w, size_t ldw, size_t rows, size_t K2p, const uint32_t* xt, size_t T,
                     const float* bias, float* y, size_t ldy) {
  amx_detail::TileRegisters tiles;
  alignas(64) float stage[kGroup * kGroup];
  alignas(64) float init[kGroup * 16];  // row i: the bias of W row r + i, 16 times (a tile row)
  for (size_t r = 0; r < rows; r += 32) {
    const int r0 = int(std::min<size_t>(16, rows - r)), r1 = int(std::min<size_t>(16, rows - std::min(rows, r + 16)));
    tiles.configure(r0, r1);
    if (bias)
      for (int i = 0; i < r0 + r1; ++i) std::fill_n(init + i * 16, 16, bias[r + size_t(i)]);
    const amx_detail::BlockStart start = bias ? amx_detail::BlockStart{init, 16, 0} : amx_detail::BlockStart{};
    const uint32_t* wr = w + r * ldw;
    // The next 32 rows of W are pulled into L2 while these run, a share of their lines per 16-pair step spread
    // over all the token groups: in a model W comes from DRAM (the layers' weights exceed L3), and without this
    // the first group of each 32 rows waited on it tile row by tile row. 3-4% on a model-shaped sequence of
    // GEMMs (cpu-classes.md, Intel); the products and their order are unchanged.
    const size_t next_lines = r + 32 < rows ? std::min<size_t>(32, rows - r - 32) * ldw * 4 / 64 : 0;
    const size_t steps = K2p / 16, groups = (T + kGroup - 1) / kGroup;
    const size_t per_step = (next_lines + groups * steps - 1) / (groups * steps);
    for (size_t g = 0; g * kGroup < T; ++g) {
      const size_t tokens = std::min(kGroup, T - g * kGroup);
      amx_detail::BlockPrefetch pf;
      if (const size_t first = g * steps * per_step; first < next_lines)
        pf = {reinterpret_cast<const char*>(w + (r + 32) * ldw) + first * 64,
              std::min(per_step, (next_lines - first) / steps)};
      // K2p is a multiple of the tiles' 16 pairs: no ragged last step, so no tail copies.
      amx_detail::block(tiles, r1 > 0, tokens > 16, K2p, wr, ldw, xt + g * K2p * kGroup, kGroup, nullptr, nullptr,
                        0, start, stage, kGroup, pf);
      transpose_out(stage, size_t(r0 + r1), tokens, y + g * kGroup * ldy + r, ldy);
    }
  }
}

}  // namespace attnzoo
