#pragma once
// The 2x2 tile blocking of every AMX GEMM here, written once over a `Tiles` policy so the same loop runs on the
// tile registers (amx_tile_registers.h: bf16_pair_gemm_amx.cc, and the projection GEMM of linear_amx_gemm_amx.cc,
// which calls block_2x2 with its own start and store) and on a plain C++ model of them (the tests, on any CPU).
//
// The operands are already in the layout AMX multiplies: A [M][K/2] pairs is a tile of 16 rows x 16 pairs,
// B [K/2][N] pairs a tile of 16 pair-rows x 16 columns ("VNNI" layout), so nothing is repacked. Eight tile
// registers: C in 0..3 as a 2x2 block of 16x16 f32 (32 rows x 32 columns), A in 4 / 5, B in 6 / 7; each
// 16-pair step is four tdpbf16ps (64 KiB of products) over four 1 KiB loads.
//
// Edges: a last group of fewer than 16 rows is a tile configured with fewer rows (loads and stores touch only
// those rows); N is a multiple of 16 (the contract), so a last 16 columns use one B tile; a reduction that is not
// a multiple of 16 pairs ends with a step whose A and B come from zero-padded copies, because a full-width tile
// load would read past A's rows (NaN * 0 is NaN) and past B's end.
//
// Tiles provides configure(rows0, rows1) (rows of C 0/1 and A 4, of C 2/3 and A 5; 0 leaves those off; B 6/7
// always 16 rows; every row 64 bytes), and per register index I: zero<I>(), load<I>(ptr, stride_bytes),
// store<I>(ptr, stride_bytes), dp<Ic, Ia, Ib>(), and optionally prefetch(ptr) (a hint; the C++ model has none).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace attnzoo::amx_detail {

constexpr size_t kTileRows = 16;  // rows of every tile; also pairs per A row and columns per B row

// How a block's four C tiles start: tile (r, c) (r, c in 0 / 1) loads 16 rows of 16 f32, `ld` floats apart, from
// p + 16 * r * ld + c * col_step. From C itself (accumulate): p = C, ld = ldc, col_step = 16. A bias broadcast
// along the columns: p = [32][16] f32 whose row i repeats bias i, ld = 16, col_step = 0. Zeros: p null.
struct BlockStart {
  const float* p = nullptr;
  size_t ld = 0, col_step = 16;
};

// Lines a block pulls toward L2 while it runs (the caller's next block of A): `lines_per_step` 64-byte lines from
// `p` on at each full 16-pair step, through the policy's prefetch() where it has one. Changes no result.
struct BlockPrefetch {
  const char* p = nullptr;
  size_t lines_per_step = 0;
};

// One block of C (up to 32 x 32) over the whole reduction, kept in the tiles from start to store: C = start +
// A[32][K2] * B[K2][32], tile (r, c) stored at C + 16 * r * ldc + 16 * c. The steps read A and B in place, ldb
// pairs between B's pair-rows; a K2 that is not a multiple of 16 ends with a step on `a_tail` [32][16] and
// `b_tail` [16][ld_tail_b] (the zero-padded copies; unused otherwise).
template <class Tiles, bool kTwoRows, bool kTwoCols>
inline void block_2x2(Tiles& t, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B, size_t ldb,
                      const uint32_t* a_tail, const uint32_t* b_tail, size_t ld_tail_b, const BlockStart& start,
                      float* C, size_t ldc, BlockPrefetch pf = {}) {
  const size_t sa = lda * 4, sb = ldb * 4, sc = ldc * 4;
  if (start.p) {
    const size_t si = start.ld * 4;
    t.template load<0>(start.p, si);
    if constexpr (kTwoCols) t.template load<1>(start.p + start.col_step, si);
    if constexpr (kTwoRows) t.template load<2>(start.p + 16 * start.ld, si);
    if constexpr (kTwoRows && kTwoCols) t.template load<3>(start.p + 16 * start.ld + start.col_step, si);
  } else {
    t.template zero<0>();
    if constexpr (kTwoCols) t.template zero<1>();
    if constexpr (kTwoRows) t.template zero<2>();
    if constexpr (kTwoRows && kTwoCols) t.template zero<3>();
  }
  // Each product follows the load of the last tile it needs, so the first product of a step starts while the
  // step's other operands still load (four loads then four products measured 3-6% slower on Emerald Rapids).
  // Every C tile still takes the steps, and its products, in the same order: the bits do not change.
  const auto step = [&](const uint32_t* a, size_t stride_a, const uint32_t* b, size_t stride_b) {
    t.template load<4>(a, stride_a);
    t.template load<6>(b, stride_b);
    t.template dp<0, 4, 6>();
    if constexpr (kTwoCols) {
      t.template load<7>(b + 16, stride_b);
      t.template dp<1, 4, 7>();
    }
    if constexpr (kTwoRows) {
      t.template load<5>(a + 16 * (stride_a / 4), stride_a);
      t.template dp<2, 5, 6>();
    }
    if constexpr (kTwoRows && kTwoCols) t.template dp<3, 5, 7>();
  };
  const size_t full = K2 / kTileRows * kTileRows;
  for (size_t k = 0; k < full; k += kTileRows) {
    if constexpr (requires { t.prefetch(pf.p); })
      for (size_t i = 0; i < pf.lines_per_step; ++i) t.prefetch(pf.p + (k / kTileRows * pf.lines_per_step + i) * 64);
    step(A + k, sa, B + k * ldb, sb);
  }
  if (full < K2) step(a_tail, kTileRows * 4, b_tail, ld_tail_b * 4);
  t.template store<0>(C, sc);
  if constexpr (kTwoCols) t.template store<1>(C + 16, sc);
  if constexpr (kTwoRows) t.template store<2>(C + 16 * ldc, sc);
  if constexpr (kTwoRows && kTwoCols) t.template store<3>(C + 16 * ldc + 16, sc);
}

// block_2x2 with its shape chosen at run time: `two_rows` (A and C have a second group of rows), `two_cols`.
template <class Tiles>
inline void block(Tiles& t, bool two_rows, bool two_cols, size_t K2, const uint32_t* A, size_t lda,
                  const uint32_t* B, size_t ldb, const uint32_t* a_tail, const uint32_t* b_tail, size_t ld_tail_b,
                  const BlockStart& start, float* C, size_t ldc, BlockPrefetch pf = {}) {
  if (two_rows && two_cols)
    block_2x2<Tiles, true, true>(t, K2, A, lda, B, ldb, a_tail, b_tail, ld_tail_b, start, C, ldc, pf);
  else if (two_rows)
    block_2x2<Tiles, true, false>(t, K2, A, lda, B, ldb, a_tail, b_tail, ld_tail_b, start, C, ldc, pf);
  else if (two_cols)
    block_2x2<Tiles, false, true>(t, K2, A, lda, B, ldb, a_tail, b_tail, ld_tail_b, start, C, ldc, pf);
  else
    block_2x2<Tiles, false, false>(t, K2, A, lda, B, ldb, a_tail, b_tail, ld_tail_b, start, C, ldc, pf);
}

// C[M x N] (+)= A * B as bf16_pair_gemm. `a_tail` [M][16] and `b_tail` [16][N] pairs are scratch for the
// reduction's ragged end (unused when K2 is a multiple of 16).
template <class Tiles>
void pair_gemm(Tiles& t, size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B,
               size_t ldb, float* C, size_t ldc, bool accumulate, uint32_t* a_tail, uint32_t* b_tail) {
  if (M == 0 || N == 0) return;
  const size_t full = K2 / kTileRows * kTileRows, rest = K2 - full;
  if (rest) {
    for (size_t m = 0; m < M; ++m) {
      std::memcpy(a_tail + m * kTileRows, A + m * lda + full, rest * 4);
      std::fill(a_tail + m * kTileRows + rest, a_tail + (m + 1) * kTileRows, 0u);
    }
    for (size_t k = 0; k < kTileRows; ++k) {
      if (k < rest)
        std::memcpy(b_tail + k * N, B + (full + k) * ldb, N * 4);
      else
        std::fill(b_tail + k * N, b_tail + (k + 1) * N, 0u);
    }
  }
  int rows0 = -1, rows1 = -1;
  for (size_t m = 0; m < M; m += 2 * kTileRows) {
    const int r0 = int(std::min(kTileRows, M - m));
    const int r1 = int(std::min(kTileRows, M - std::min(M, m + kTileRows)));
    if (r0 != rows0 || r1 != rows1) t.configure(r0, r1);  // only at the last group of rows
    rows0 = r0, rows1 = r1;
    const uint32_t* a = A + m * lda;
    const uint32_t* at = a_tail + m * kTileRows;
    for (size_t n = 0; n < N; n += 2 * kTileRows) {
      float* c = C + m * ldc + n;
      const BlockStart start = accumulate ? BlockStart{c, ldc} : BlockStart{};
      block(t, r1 > 0, n + kTileRows < N, K2, a, lda, B + n, ldb, at, b_tail + n, N, start, c, ldc);
    }
  }
}

}  // namespace attnzoo::amx_detail
