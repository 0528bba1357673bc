#pragma once
// The device side of the CUDA prefill: one CTA computes one tile of kQueryTile query rows of one head of one
// sequence (FlashAttention-2). Four warps own 16 query rows each; key/value tiles stream through shared memory
// (cp.async, double-buffered); S = Q K^T and O += P V run on m16n8k16 tensor-core MMAs; the online softmax
// lives in the MMA accumulator registers.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A 16x16 row-major: a0 (row g, cols 2t..2t+1), a1 (row g+8, same cols), a2 (row g, cols 2t+8..), a3 (g+8, 2t+8..)
//   B 16x8 "col":      b0 (k rows 2t..2t+1, col g), b1 (k rows 2t+8..2t+9, col g)
//   C 16x8:            c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 reads four 8x8 b16 matrices whose row addresses come from lanes 0-7, 8-15, 16-23, 24-31; register
// i receives matrix i with lane holding row g, elements 2t..2t+1 (with .trans: column g, rows 2t..2t+1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/softmax/cuda/prefill_params.h"
#include "kernels/softmax/cuda/online_softmax.cuh"
#include "kernels/softmax/cuda/prefill_rows.cuh"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_prefill {

// Rows [row0, row0 + R) of one head's [T, D] matrix (token stride `token` elements) into shared memory with
// pitch kPitch; rows at or past T are zero-filled, so they contribute exact zeros to QK^T and PV.
template <int R, int D, class Elem>
__device__ __forceinline__ void load_rows(Elem* dst, const Elem* src, int64_t token, int row0, int T, int tid) {
  constexpr int kChunks = D / 8;  // 16-byte pieces per row
  if constexpr (kThreads % kChunks == 0) {
    constexpr int kRowStep = kThreads / kChunks;  // rows between one thread's successive pieces
    static_assert(R % kRowStep == 0);
    const int r0 = tid / kChunks, c = tid % kChunks;
    const uint32_t d0 = sm80::smem_u32(dst + r0 * TileShape<D>::kPitch + c * 8);
#pragma unroll
    for (int i = 0; i < R / kRowStep; ++i) {
      const int row = row0 + r0 + i * kRowStep;
      const bool valid = row < T;
      // An invalid row still gets an address inside the tensor (row 0 of this head; T > 0 whenever we load).
      const Elem* g = src + int64_t(valid ? row : 0) * token + c * 8;
      sm80::cp_async_16(d0 + i * kRowStep * TileShape<D>::kPitch * 2, g, valid);
    }
  } else {
    // A row of pieces that does not divide the CTA (12 at D = 96): thread tid copies pieces tid, tid + kThreads,
    // ... of the tile read row-major, still whole rows per warp instruction but no fixed column per thread.
    static_assert(R * kChunks % kThreads == 0);
#pragma unroll
    for (int i = 0; i < R * kChunks / kThreads; ++i) {
      const int piece = tid + i * kThreads, r = piece / kChunks, c = piece % kChunks;
      const int row = row0 + r;
      const bool valid = row < T;
      const Elem* g = src + int64_t(valid ? row : 0) * token + c * 8;
      sm80::cp_async_16(sm80::smem_u32(dst + r * TileShape<D>::kPitch + c * 8), g, valid);
    }
  }
}

template <class Elem, int D>
__device__ __forceinline__ void attend_tile(const PrefillParams& p, int work_index, int head, unsigned char* smem) {
  using Shape = TileShape<D>;
  constexpr int Br = Shape::kBr, Bc = Shape::kBc, P = Shape::kPitch;
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;

  const WorkItem w = p.work[work_index];
  const SeqDesc s = p.seqs[w.seq];
  const int m0 = w.q_start, kv_head = head / p.group;
  const Elem* q = static_cast<const Elem*>(p.q) + s.q_offset + int64_t(head) * p.q_head;
  const Elem* k = static_cast<const Elem*>(p.k) + s.k_offset + int64_t(kv_head) * p.k_head;
  const Elem* v = static_cast<const Elem*>(p.v) + s.v_offset + int64_t(kv_head) * p.v_head;
  Elem* sQ = reinterpret_cast<Elem*>(smem);
  Elem* sK = sQ + Br * P;      // [2][Bc][P]
  Elem* sV = sK + 2 * Bc * P;  // [2][Bc][P]

  const KeyTiles range = key_tiles(p, s, m0, Br, Bc);
  const int n_begin = range.n_begin, n_end = range.n_end;

  // Two commit groups, Q then the first K/V tile (possibly empty), so Q can be waited for alone.
  load_rows<Br, D>(sQ, q, p.q_token, m0, s.Tq, tid);
  sm80::cp_async_commit();
  if (n_begin < n_end) {
    load_rows<Bc, D>(sK, k, p.k_token, n_begin * Bc, s.Tk, tid);
    load_rows<Bc, D>(sV, v, p.v_token, n_begin * Bc, s.Tk, tid);
  }
  sm80::cp_async_commit();
  sm80::cp_async_wait<1>();
  sm80::sync_threads();

  // ldmatrix row addresses per lane. A operand (Q, P-shaped): matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15) in
  // a0..a3 order. K for S = Q K^T (B = K^T, n = key): b0, b1 of keys 0-7, then b0, b1 of keys 8-15. V for
  // O += P V (B = V, k = key, transposed load): b0, b1 of dims 0-7, then b0, b1 of dims 8-15.
  const int a_row = (lane % 8) + ((lane / 8) % 2) * 8, a_col = (lane / 16) * 8;
  const int k_row = (lane % 8) + (lane / 16) * 8, k_col = ((lane / 8) % 2) * 8;
  const int v_row = (lane % 8) + ((lane / 8) % 2) * 8, v_col = (lane / 16) * 8;
  const Elem* q_frag_base = sQ + (warp * 16 + a_row) * P + a_col;

  [[maybe_unused]] uint32_t q_frag[Shape::kQInRegisters ? D / 16 : 1][4];
  if constexpr (Shape::kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) sm80::ldmatrix_x4(q_frag[kk], sm80::smem_u32(q_frag_base + kk * 16));
  }

  // This thread's two rows (g and g + 8 of its warp's 16) as sequence positions.
  const int row = m0 + warp * 16 + g;
  const int qpos[2] = {s.Tk - s.Tq + row, s.Tk - s.Tq + row + 8};

  // Softmax state in log2 units. A sink is one more logit: starting the running max at it is what the reference
  // does (m = sink before the keys), and its exp joins the denominator at the end.
  const float sink_log2 = p.sinks ? p.sinks[head] * kLog2e : -INFINITY;
  const float slope_log2 = p.alibi_slopes ? p.alibi_slopes[head] * kLog2e : 0.f;
  float row_max[2] = {sink_log2, sink_log2};
  float row_sum[2] = {0.f, 0.f};  // this thread's share of its rows; the 4 threads of a row add up at the end
  float acc[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.f;

  for (int n = n_begin; n < n_end; ++n) {
    const int buf = (n - n_begin) & 1;
    // The other buffer was last read in the previous iteration, which ended with a barrier.
    if (n + 1 < n_end) {
      load_rows<Bc, D>(sK + (buf ^ 1) * Bc * P, k, p.k_token, (n + 1) * Bc, s.Tk, tid);
      load_rows<Bc, D>(sV + (buf ^ 1) * Bc * P, v, p.v_token, (n + 1) * Bc, s.Tk, tid);
    }
    sm80::cp_async_commit();  // possibly empty, so that "all but the newest group" is always tile n
    sm80::cp_async_wait<1>();
    sm80::sync_threads();
    const Elem* kt = sK + buf * Bc * P;
    const Elem* vt = sV + buf * Bc * P;

    float sc[Bc / 8][4];
#pragma unroll
    for (int nb = 0; nb < Bc / 8; ++nb) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      if constexpr (Shape::kQInRegisters) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = q_frag[kk][i];
      } else {
        sm80::ldmatrix_x4(a, sm80::smem_u32(q_frag_base + kk * 16));
      }
#pragma unroll
      for (int pair = 0; pair < Bc / 16; ++pair) {
        uint32_t b[4];
        sm80::ldmatrix_x4(b, sm80::smem_u32(kt + (pair * 16 + k_row) * P + kk * 16 + k_col));
        sm80::mma_16816<Elem>(sc[2 * pair], a, b[0], b[1]);
        sm80::mma_16816<Elem>(sc[2 * pair + 1], a, b[2], b[3]);
      }
    }

    score_tile(p, s, range, n * Bc, qpos, t, slope_log2, sc);

    // Online softmax: the running max, the rescaled sums and accumulators, the weights (online_softmax.cuh).
    sm80::online_softmax_step(sc, acc, row_max, row_sum);

    // O += P V. The S accumulators of key columns 16kk..16kk+15 are exactly an A fragment: a0/a1 from n-block
    // 2kk (rows g, g+8), a2/a3 from n-block 2kk+1.
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      const uint32_t a[4] = {sm80::pack2<Elem>(sc[2 * kk][0], sc[2 * kk][1]),
                             sm80::pack2<Elem>(sc[2 * kk][2], sc[2 * kk][3]),
                             sm80::pack2<Elem>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                             sm80::pack2<Elem>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int pair = 0; pair < D / 16; ++pair) {
        uint32_t b[4];
        sm80::ldmatrix_x4_trans(b, sm80::smem_u32(vt + (kk * 16 + v_row) * P + pair * 16 + v_col));
        sm80::mma_16816<Elem>(acc[2 * pair], a, b[0], b[1]);
        sm80::mma_16816<Elem>(acc[2 * pair + 1], a, b[2], b[3]);
      }
    }
    sm80::sync_threads();  // everyone is done with buffer `buf` before the next iteration refills it
  }

  finish_rows<D>(p, s, head, row, t, acc, row_max, row_sum, sink_log2);
}

}  // namespace attnzoo::cuda_prefill
