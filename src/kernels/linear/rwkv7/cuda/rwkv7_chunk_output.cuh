#pragma once
// Kernel 3 of the chunked RWKV-7 (rwkv7_chunk_cuda.h): per (chunk, head), with S the state before the chunk and
// SA the chunk's low-rank reads from the state pass,
//   O = (q e^{G}) S + [A_qk | A_qb] [V; SA]
// all four factors prepared by the other passes (decays folded in, zero right of the diagonal), so this is two
// tensor-core products per 16 x 16 output block, the second stopping at the block's diagonal in both halves.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"

namespace attnzoo::cuda_rwkv7_chunk {

template <int C>
__device__ __forceinline__ void rwkv7_chunk_output(const Params& p, unsigned char* smem) {
  using namespace cuda_delta_chunk;
  constexpr int kBlocks = C / 16;
  const int Kp = p.Kp, Vp = p.Vp;
  const OutputSmem L(C, Kp, Vp);
  Bf16* sQ = reinterpret_cast<Bf16*>(smem + L.q);
  Bf16* sH = reinterpret_cast<Bf16*>(smem + L.h);
  Bf16* sP = reinterpret_cast<Bf16*>(smem + L.p);
  Bf16* sVSA = reinterpret_cast<Bf16*>(smem + L.vsa);
  const int ldk = pitch(Kp), ldv = pitch(Vp), ldp = pitch(2 * C);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  (void)tid;
  const int64_t c_h = blockIdx.x;
  const int h = int(c_h % p.H);
  const ChunkDesc ch = p.chunks[c_h / p.H];
  if (p.state_indices && p.state_indices[ch.seq] < 0) return;  // a pad's chunk: its state pass stored no h

  copy_rows(sQ, ldk, p.qg + c_h * rows_elems(C, Kp), C, Kp);
  copy_rows(sH, ldv, p.h + c_h * rows_elems(Kp, Vp), Kp, Vp);
  copy_rows(sP, ldp, p.pm + c_h * rows_elems(C, 2 * C), C, 2 * C);
  copy_rows(sVSA, ldv, p.vsa + c_h * rows_elems(2 * C, Vp), 2 * C, Vp);
  sm80::cp_async_commit();
  sm80::cp_async_wait<0>();
  sm80::sync_threads();

  for (int task = warp; task < kBlocks * (Vp / 16); task += kWarps) {
    const int rb = task % kBlocks, n0 = task / kBlocks * 16;
    float acc[2][4];
    zero(acc);
    for (int k0 = 0; k0 < Kp; k0 += 16) {
      uint32_t a[4], b[4];
      load_a(a, sQ, ldk, rb * 16, k0, lane);
      load_b_kn(b, sH, ldv, k0, n0, lane);
      mma_16x16(acc, a, b);
    }
    for (int half = 0; half < 2; ++half)
      for (int kk = 0; kk <= rb; ++kk) {
        uint32_t a[4], b[4];
        load_a(a, sP, ldp, rb * 16, half * C + kk * 16, lane);
        load_b_kn(b, sVSA, ldv, half * C + kk * 16, n0, lane);
        mma_16x16(acc, a, b);
      }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = rb * 16 + acc_row(lane, e), col = n0 + acc_col(lane, nt, e);
        if (i < ch.len && col < p.V)
          cuda_linear::store_elem(p.o, p.o_t, ((ch.row + i) * p.H + h) * p.V + col, acc[nt][e]);
      }
  }
}

}  // namespace attnzoo::cuda_rwkv7_chunk
