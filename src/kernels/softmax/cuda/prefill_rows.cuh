#pragma once
// What both CUDA prefill paths (prefill_tile.cuh on mma.sync, prefill_sm90_tile.cuh on wgmma) do per query row,
// on the same register layout: a thread holds two rows (g and g + 8 of its warp's 16) and, for each 8-key block
// nb, their scores sc[nb][0..1] (row g, keys 2t, 2t+1) and sc[nb][2..3] (row g + 8); the output accumulators
// the same way per 8 dims. The key range a query tile sees, the score transform and mask, and the epilogue.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/softmax/cuda/prefill_params.h"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_prefill {

// Bottom-right alignment: query i sits at position Tk - Tq + i. The keys any row of the tile [m0, m0 + Br)
// can see form [kbeg, kend); key tiles of Bc outside it are never loaded.
struct KeyTiles {
  int qlo, qhi;          // positions of the tile's first and last real rows
  int n_begin, n_end;    // key tiles [n_begin, n_end)
};
__device__ __forceinline__ KeyTiles key_tiles(const PrefillParams& p, const SeqDesc& s, int m0, int Br, int Bc) {
  const int rows = min(Br, s.Tq - m0);
  const int qlo = s.Tk - s.Tq + m0, qhi = qlo + rows - 1;
  const int kbeg = p.window > 0 ? max(0, qlo - p.window + 1) : 0;
  const int kend = p.causal ? min(s.Tk, qhi + 1) : s.Tk;
  const int n_begin = kbeg / Bc;
  return {qlo, qhi, n_begin, kend > kbeg ? (kend + Bc - 1) / Bc : n_begin};
}

// transform_score's order: scale, softcap, ALiBi; then the mask, into log2 units. Only key tiles that straddle
// the causal or window band or the end of the keys need the per-element mask.
template <int KeyBlocks>
__device__ __forceinline__ void score_tile(const PrefillParams& p, const SeqDesc& s, const KeyTiles& r, int k0,
                                           const int (&qpos)[2], int t, float slope_log2,
                                           float (&sc)[KeyBlocks][4]) {
  constexpr int Bc = 8 * KeyBlocks;
  const bool masked =
      k0 + Bc > s.Tk || (p.causal && k0 + Bc - 1 > r.qlo) || (p.window > 0 && k0 <= r.qhi - p.window);
#pragma unroll
  for (int nb = 0; nb < KeyBlocks; ++nb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int kpos = k0 + nb * 8 + 2 * t + (e & 1), qp = qpos[e / 2];
      float x = sc[nb][e];
      x = p.softcap > 0.f ? p.softcap_log2 * tanhf(x * p.scale_over_softcap) : x * p.scale_log2;
      if (p.alibi_slopes) x -= slope_log2 * float(abs(qp - kpos));
      if (masked) {
        const bool visible = kpos < s.Tk && (!p.causal || kpos <= qp) && (p.window <= 0 || kpos > qp - p.window);
        if (!visible) x = -INFINITY;
      }
      sc[nb][e] = x;
    }
  }
}

template <class Out, int D>
__device__ __forceinline__ void store_rows(const PrefillParams& p, const SeqDesc& s, int head, int row, int t,
                                           const float (&acc)[D / 8][4], const float (&inv)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row + 8 * r >= s.Tq) continue;  // tail rows of the last tile (zeros, or a neighbour's rows) are never stored
    Out* dst = static_cast<Out*>(p.o) + s.o_offset + int64_t(row + 8 * r) * p.o_token + int64_t(head) * p.o_head;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      sm80::store2(dst + nd * 8 + 2 * t, acc[nd][2 * r] * inv[r], acc[nd][2 * r + 1] * inv[r]);
  }
}

// The row sums gathered from the four threads of each row, the sink's weight added, and the normalized rows
// `row` and `row + 8` stored in out's dtype.
template <int D>
__device__ __forceinline__ void finish_rows(const PrefillParams& p, const SeqDesc& s, int head, int row, int t,
                                            const float (&acc)[D / 8][4], const float (&row_max)[2],
                                            const float (&row_sum)[2], float sink_log2) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_sum[r];
    l += sm80::shfl_xor(l, 1);
    l += sm80::shfl_xor(l, 2);
    // With a sink, row_max started at it and so is finite; without one, a row that saw no key has l = 0.
    if (p.sinks) l += sm80::exp2_approx(sink_log2 - row_max[r]);
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
  switch (p.out_type) {
    case OutType::f32: store_rows<float, D>(p, s, head, row, t, acc, inv); break;
    case OutType::bf16: store_rows<__nv_bfloat16, D>(p, s, head, row, t, acc, inv); break;
    case OutType::f16: store_rows<__half, D>(p, s, head, row, t, acc, inv); break;
  }
}

}  // namespace attnzoo::cuda_prefill
