// linear_amx_gemm.h on the tile registers. Compiled for AMX (see CMakeLists.txt); reached only where
// amx_bf16_enabled().
//
// Eight tiles as bf16_pair_gemm uses them: C 0..3 a 2x2 block of 16 x 16 f32 (32 rows of W x 32 tokens), A 4 / 5
// two groups of 16 W rows, B 6 / 7 two groups of 16 tokens; each 16-pair step is four tdpbf16ps over four loads.
// Unlike a bf16_pair_gemm call per reduction block, C stays in the tiles for the whole reduction (no round trip
// through memory between blocks) and is stored once, to a 4 KiB buffer that is transposed into y.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/amx.h"
#include "kernels/common/bf16_dot.h"
#include "layers/linear_amx_gemm.h"

namespace attnzoo {
namespace {

constexpr size_t kGroup = kAmxTokenGroup;

// The shapes this call configures. Nothing is assumed of the configuration in force when the call starts (another
// kernel or library in the thread may have set or released the tiles): the first configure() loads one.
class TileConfigScope {
 public:
  TileConfigScope() = default;
  void configure(int r0, int r1) {
    if (r0 == rows0_ && r1 == rows1_) return;
    const AmxTileConfig cfg = amx_2x2_config(r0, r1);
    amx_load_tile_config(cfg);
    rows0_ = r0, rows1_ = r1;
  }
  TileConfigScope(const TileConfigScope&) = delete;
  TileConfigScope& operator=(const TileConfigScope&) = delete;

 private:
  int rows0_ = -1, rows1_ = -1;
};

// One 32 x 32 block of y^T over the whole reduction: C(r, t) = init(r) + sum_k w[r][k] . b[k][t], stored to
// stage [32][32] f32. `init` [32][16] f32 (row r the bias of W row r) or null for zeros.
template <bool kTwoRows, bool kTwoCols>
void block(const uint32_t* w, size_t ldw, size_t K2p, const uint32_t* b, const float* init, float* stage) {
  const size_t sw = ldw * 4, sb = kGroup * 4;
  if (init) {
    _tile_loadd(0, init, 64);
    if constexpr (kTwoCols) _tile_loadd(1, init, 64);
    if constexpr (kTwoRows) _tile_loadd(2, init + 16 * 16, 64);
    if constexpr (kTwoRows && kTwoCols) _tile_loadd(3, init + 16 * 16, 64);
  } else {
    _tile_zero(0);
    if constexpr (kTwoCols) _tile_zero(1);
    if constexpr (kTwoRows) _tile_zero(2);
    if constexpr (kTwoRows && kTwoCols) _tile_zero(3);
  }
  for (size_t k = 0; k < K2p; k += 16) {
    _tile_loadd(4, w + k, sw);
    if constexpr (kTwoRows) _tile_loadd(5, w + 16 * ldw + k, sw);
    _tile_loadd(6, b + k * kGroup, sb);
    if constexpr (kTwoCols) _tile_loadd(7, b + k * kGroup + 16, sb);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kTwoCols) _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwoRows) _tile_dpbf16ps(2, 5, 6);
    if constexpr (kTwoRows && kTwoCols) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, stage, sb);
  if constexpr (kTwoCols) _tile_stored(1, stage + 16, sb);
  if constexpr (kTwoRows) _tile_stored(2, stage + 16 * kGroup, sb);
  if constexpr (kTwoRows && kTwoCols) _tile_stored(3, stage + 16 * kGroup + 16, sb);
}

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
  TileConfigScope tiles;
  alignas(64) float stage[kGroup * kGroup];
  alignas(64) float init[kGroup * 16];
  for (size_t r = 0; r < rows; r += 32) {
    const int r0 = int(std::min<size_t>(16, rows - r)), r1 = int(std::min<size_t>(16, rows - std::min(rows, r + 16)));
    tiles.configure(r0, r1);
    if (bias)
      for (int i = 0; i < r0 + r1; ++i) std::fill_n(init + i * 16, 16, bias[r + size_t(i)]);
    const uint32_t* wr = w + r * ldw;
    for (size_t g = 0; g * kGroup < T; ++g) {
      const size_t tokens = std::min(kGroup, T - g * kGroup);
      const uint32_t* b = xt + g * K2p * kGroup;
      const float* in = bias ? init : nullptr;
      if (r1 && tokens > 16)
        block<true, true>(wr, ldw, K2p, b, in, stage);
      else if (r1)
        block<true, false>(wr, ldw, K2p, b, in, stage);
      else if (tokens > 16)
        block<false, true>(wr, ldw, K2p, b, in, stage);
      else
        block<false, false>(wr, ldw, K2p, b, in, stage);
      transpose_out(stage, size_t(r0 + r1), tokens, y + g * kGroup * ldy + r, ldy);
    }
  }
}

}  // namespace attnzoo
