#pragma once
// Warp-level pieces of the chunked delta rule's tensor-core products: fragments of bf16 tiles in shared memory
// for mma.m16n8k16 (layouts in softmax/cuda/sm80.cuh, whose wrappers run these on the GPU and under the
// emulator alike), a tile's 16 x 16 product step, a 16 x 16 block of a Gram matrix, and the staging of input rows
// as bf16 tiles.
//
// A tile is row-major with a pitch of pitch(cols) elements. Four ways to read one: as the A operand (16 x 16 at
// (r0, c0)) straight or transposed, and as the B operand (16 k x 16 n, two n-tiles of 8) stored [n][k] (keys for
// Q K^T) or [k][n] (values for P V). The transposed A is what K^T v_new needs without a transposed copy of K.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/common/cuda/warp_reduce.cuh"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_delta_chunk {

using Bf16 = __nv_bfloat16;

// The shared address a lane hands ldmatrix for the A operand at (r0, c0) (its row of one of the four 8 x 8s).
__device__ __forceinline__ uint32_t a_address(const Bf16* tile, int ld, int r0, int c0, int lane) {
  const int row = r0 + lane % 8 + (lane / 8) % 2 * 8, col = c0 + lane / 16 * 8;
  return sm80::smem_u32(tile + row * ld + col);
}

__device__ __forceinline__ void load_a(uint32_t (&a)[4], const Bf16* tile, int ld, int r0, int c0, int lane) {
  sm80::ldmatrix_x4(a, a_address(tile, ld, r0, c0, lane));
}

// A[i][j] = tile[c0 + j][r0 + i]: matrix m of the four covers A's rows (m % 2) * 8.. and columns (m / 2) * 8..,
// i.e. tile rows c0 + (m / 2) * 8.. and columns r0 + (m % 2) * 8.., read transposed.
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const Bf16* tile, int ld, int r0, int c0, int lane) {
  const int m = lane / 8;
  const int row = c0 + m / 2 * 8 + lane % 8, col = r0 + m % 2 * 8;
  sm80::ldmatrix_x4_trans(a, sm80::smem_u32(tile + row * ld + col));
}

// The same for the B operand stored [n][k], at (k0, n0).
__device__ __forceinline__ uint32_t b_nk_address(const Bf16* tile, int ld, int k0, int n0, int lane) {
  const int row = n0 + lane % 8 + lane / 16 * 8, col = k0 + (lane / 8) % 2 * 8;
  return sm80::smem_u32(tile + row * ld + col);
}

// B[k][n] = tile[n0 + n][k0 + k]: b[0], b[1] for n 0-7, b[2], b[3] for n 8-15.
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const Bf16* tile, int ld, int k0, int n0, int lane) {
  sm80::ldmatrix_x4(b, b_nk_address(tile, ld, k0, n0, lane));
}

// B[k][n] = tile[k0 + k][n0 + n]: same register order.
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const Bf16* tile, int ld, int k0, int n0, int lane) {
  const int row = k0 + lane % 8 + (lane / 8) % 2 * 8, col = n0 + lane / 16 * 8;
  sm80::ldmatrix_x4_trans(b, sm80::smem_u32(tile + row * ld + col));
}

// acc (16 x 16 as two n-tiles) += A (16 x 16) B (16 x 16).
__device__ __forceinline__ void mma_16x16(float (&acc)[2][4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  sm80::mma_16816<Bf16>(acc[0], a, b[0], b[1]);
  sm80::mma_16816<Bf16>(acc[1], a, b[2], b[3]);
}

__device__ __forceinline__ void zero(float (&acc)[2][4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
}

// Where accumulator element e of n-tile nt lies in its 16 x 16 block: row g + 8 (e / 2), column nt 8 + 2 t + e % 2.
__device__ __forceinline__ int acc_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
__device__ __forceinline__ int acc_col(int lane, int nt, int e) { return nt * 8 + 2 * (lane % 4) + e % 2; }

// acc = X rows [x0, x0 + 16) times Y rows [y0, y0 + 16) transposed, over the Kp columns of both (bf16 tiles rows
// `ld` apart): one 16 x 16 block of a Gram matrix X Y^T. The lane's two addresses are formed once and step 16
// columns (32 bytes) a k step: the same addresses, loads and products as forming them at each step, but with
// them formed at each step the 16-row intra kernel took 44 registers on sm_80, not 40 (10 CTAs an SM where 12
// fit; docs/benchmarks/cuda.md, "The chunked delta rule's registers").
__device__ __forceinline__ void gram_block(float (&acc)[2][4], const Bf16* X, int x0, const Bf16* Y, int y0, int ld,
                                           int Kp, int lane) {
  zero(acc);
  uint32_t xa = a_address(X, ld, x0, 0, lane), yb = b_nk_address(Y, ld, 0, y0, lane);
  for (int k0 = 0; k0 < Kp; k0 += 16, xa += 32, yb += 32) {
    uint32_t a[4], b[4];
    sm80::ldmatrix_x4(a, xa);
    sm80::ldmatrix_x4(b, yb);
    mma_16x16(acc, a, b);
  }
}

// The lower 16 x 16 blocks (column block <= row block) of X Y^T, X and Y [C, Kp] bf16 rows `ld` apart: one block
// per warp task by mma.sync, then visit(i, j, x0, x1) for each pair of neighbouring elements (i, j), (i, j + 1) a
// lane holds, so a caller can mask, scale and store them (paired or one by one).
template <int C, class Visit>
__device__ __forceinline__ void lower_gram_blocks(const Bf16* X, const Bf16* Y, int ld, int Kp, int warp, int lane,
                                                  Visit&& visit) {
  constexpr int kBlocks = C / 16;
  for (int task = warp; task < kBlocks * kBlocks; task += kWarps) {
    const int rb = task / kBlocks, cb = task % kBlocks;
    if (cb > rb) continue;
    float acc[2][4];
    gram_block(acc, X, rb * 16, Y, cb * 16, ld, Kp, lane);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        visit(rb * 16 + acc_row(lane, 2 * half), cb * 16 + acc_col(lane, nt, 0), acc[nt][2 * half],
              acc[nt][2 * half + 1]);
  }
}

// Rows [0, C) of a bf16 tile from one head of an input: row i < len is the `D` elements at src + first + i *
// stride (any float dtype), element (i, col) times scale and factor(i, col), after fla's l2norm when asked (the
// factor is a decay, per token or per token and channel); rows past len and columns
// [D, Dp) are zeros, so padded tokens and dims add exact zeros to every product. Warp w stages rows w, w + 4, ...,
// lane l columns l, l + 32, ... (D <= kMaxDim), and the norm is one warp sum in f32 before the bf16 rounding.
// `map` applies to each loaded element first (the gated-linear group's feature maps; l2norm sees mapped rows).
template <class Factor, class Map>
__device__ __forceinline__ void stage_rows(Bf16* dst, int ld, const void* src, Elem t, int64_t first,
                                           int64_t stride, int len, int C, int D, int Dp, bool l2norm, float scale,
                                           const Factor& factor, const Map& map) {
  const int lane = sm80::thread_index() % 32, warp = sm80::thread_index() / 32;
  for (int i = warp; i < C; i += kWarps) {
    float x[kMaxDim / 32];
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxDim / 32; ++j) {
      const int col = lane + 32 * j;
      x[j] = i < len && col < D ? map(cuda_linear::load_elem(src, t, first + i * stride + col)) : 0.f;
      sq = fmaf(x[j], x[j], sq);
    }
    float s = scale;
    if (l2norm) s /= sqrtf(cuda_linear::warp_sum(sq) + 1e-6f);
#pragma unroll
    for (int j = 0; j < kMaxDim / 32; ++j) {
      const int col = lane + 32 * j;
      if (col < Dp) dst[i * ld + col] = __float2bfloat16_rn(i < len && col < D ? x[j] * s * factor(i, col) : 0.f);
    }
  }
}

struct Identity {
  __device__ __forceinline__ float operator()(float x) const { return x; }
};

template <class Factor>
__device__ __forceinline__ void stage_rows(Bf16* dst, int ld, const void* src, Elem t, int64_t first,
                                           int64_t stride, int len, int C, int D, int Dp, bool l2norm, float scale,
                                           const Factor& factor) {
  stage_rows(dst, ld, src, t, first, stride, len, C, D, Dp, l2norm, scale, factor, Identity{});
}

// The WY products of a chunk's intra pass: W = Lw Rw [C x Kp] (bf16, row pitch Kp) and U = Lu Ru [C x Vp] (f32,
// row pitch Vp), the left factors [C x C] (pitch ldc) lower triangular with zeros above the diagonal. One 16 x 16
// output block per warp task; the inner dimension stops at the block's diagonal.
template <int C>
__device__ __forceinline__ void lower_products(const Bf16* w_left, const Bf16* w_right, int ldk, const Bf16* u_left,
                                               const Bf16* u_right, int ldv, int ldc, int Kp, int Vp, Bf16* w,
                                               float* u, int warp, int lane) {
  constexpr int kBlocks = C / 16;
  const int wk = Kp / 16, uk = Vp / 16;
  for (int task = warp; task < kBlocks * (wk + uk); task += kWarps) {
    const int rb = task % kBlocks, cg = task / kBlocks;
    const bool is_w = cg < wk;
    const int n0 = (is_w ? cg : cg - wk) * 16;
    float acc[2][4];
    zero(acc);
    for (int kk = 0; kk <= rb; ++kk) {
      uint32_t a[4], b[4];
      load_a(a, is_w ? w_left : u_left, ldc, rb * 16, kk * 16, lane);
      load_b_kn(b, is_w ? w_right : u_right, is_w ? ldk : ldv, kk * 16, n0, lane);
      mma_16x16(acc, a, b);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = rb * 16 + acc_row(lane, 2 * half), j = n0 + acc_col(lane, nt, 0);
        if (is_w)
          sm80::store2(w + i * Kp + j, acc[nt][2 * half], acc[nt][2 * half + 1]);
        else
          sm80::store2(u + i * Vp + j, acc[nt][2 * half], acc[nt][2 * half + 1]);
      }
  }
}

// Two neighbouring elements of a shared tile (sm80::store2 is for global memory).
__device__ __forceinline__ void put2(Bf16* dst, float x0, float x1) {
  dst[0] = __float2bfloat16_rn(x0);
  dst[1] = __float2bfloat16_rn(x1);
}

struct One {
  __device__ __forceinline__ float operator()(int, int) const { return 1.f; }
};

// `rows` rows of `row_bytes` (a multiple of 16) from global memory, `src_pitch` bytes apart, into a shared tile
// with `dst_pitch` bytes per row, by cp.async; the caller commits and waits.
__device__ __forceinline__ void copy_rows(void* dst, int dst_pitch, const void* src, int64_t src_pitch, int rows,
                                          int row_bytes) {
  const int pieces = row_bytes / 16;
  for (int x = sm80::thread_index(); x < rows * pieces; x += kThreads) {
    const int r = x / pieces, c = x % pieces * 16;
    sm80::cp_async_16(sm80::smem_u32(static_cast<unsigned char*>(dst) + r * dst_pitch + c),
                      static_cast<const unsigned char*>(src) + r * src_pitch + c, true);
  }
}

// A bf16 tile of `rows` x `cols` stored densely (row pitch `cols`) in global memory.
__device__ __forceinline__ void copy_rows(Bf16* dst, int ld, const uint16_t* src, int rows, int cols) {
  copy_rows(dst, ld * 2, src, int64_t(cols) * 2, rows, cols * 2);
}

}  // namespace attnzoo::cuda_delta_chunk
