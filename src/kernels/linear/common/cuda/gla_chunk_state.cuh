#pragma once
// Kernel 2 of the chunked gated linear recurrence (gla_chunk_cuda.h): the only sequential part. A CTA owns one
// (sequence, value head, slice of kStateCols = 32 state columns) and walks the sequence's chunks in order with
// its slice of the f32 state h [Kp x 32] in MMA accumulator registers (warp w holds row blocks w and w + 4), as
// the delta rule's state pass does (delta_chunk_state.cuh). Per chunk:
//   store h (bf16) for the output kernel;   h <- exp(G_last) h + Kd^T V
// with Kd = phi(K) exp(G_last - G) and exp(G_last) from the prep kernel (for GLA G_last is per key channel: a
// decay per state row). Kd, the V slice and the decays of the next chunk arrive by cp.async while this one is
// worked on, so the chain from chunk to chunk is shared-memory and tensor-core work only.
#include <cstdint>

#include "kernels/linear/common/cuda/gla_chunk_tiles.cuh"

namespace attnzoo::cuda_gla_chunk {

constexpr int kStateBlocks = kMaxDim / 16 / kWarps;  // row blocks of h per warp

template <int C>
__device__ __forceinline__ void gla_chunk_state(const Params& p, unsigned char* smem) {
  constexpr int kTiles = kStateCols / 8;
  const StateSmem L(C, p.Kp);
  Bf16* sKd = reinterpret_cast<Bf16*>(smem + L.kd);  // [2][C][ldk]
  Bf16* sV = reinterpret_cast<Bf16*>(smem + L.v);    // [2][C][lds]
  float* sDecay = reinterpret_cast<float*>(smem + L.decay);  // [2][Kp]
  const int ldk = pitch(p.Kp), lds = pitch(kStateCols);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int slices = p.Vp / kStateCols;
  int64_t cta = blockIdx.x;
  const int col0 = int(cta % slices) * kStateCols;
  cta /= slices;
  const int hv = int(cta % p.HV);
  const int64_t n = cta / p.HV;

  // s[i][nt][e]: row (warp + 4 i) 16 + acc_row(e), column col0 + acc_col(nt, e).
  float s[kStateBlocks][kTiles][4];
  const int64_t state_at = (n * p.HV + hv) * int64_t(p.K) * p.V;
#pragma unroll
  for (int i = 0; i < kStateBlocks; ++i)
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = (warp + kWarps * i) * 16 + acc_row(lane, e), col = col0 + acc_col(lane, nt, e);
        const bool inside = p.initial_state && r < p.K && col < p.V;
        s[i][nt][e] = inside ? p.initial_state[state_at + r * p.state_row + col * p.state_col] : 0.f;
      }

  const int first = p.seq_chunks[n], end = p.seq_chunks[n + 1];
  // Kd, the slice's V columns (64 contiguous bytes of each row) and the row decays of chunk c into buffer b.
  auto fetch = [&](int c, int b) {
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    copy_rows(sKd + b * C * ldk, ldk, p.kd + c_hv * kd_elems(C, p.Kp), C, p.Kp);
    copy_rows(sV + b * C * lds, lds * 2, p.vb + c_hv * v_elems(C, p.Vp) + col0, int64_t(p.Vp) * 2, C,
              kStateCols * 2);
    copy_rows(sDecay + b * p.Kp, p.Kp * 4, p.decay + c_hv * p.Kp, p.Kp * 4, 1, p.Kp * 4);
  };
  if (first < end) fetch(first, 0);
  sm80::cp_async_commit();

  for (int c = first; c < end; ++c) {
    const int b = (c - first) & 1;
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    // The other buffers were last read by chunk c - 1's update, which a barrier has closed.
    if (c + 1 < end) fetch(c + 1, b ^ 1);
    sm80::cp_async_commit();  // possibly empty, so that "all but the newest group" is always chunk c's

    Bf16* h_out = reinterpret_cast<Bf16*>(p.h) + c_hv * h_elems(p.Kp, p.Vp);
#pragma unroll
    for (int i = 0; i < kStateBlocks; ++i) {
      const int rb = warp + kWarps * i;
      if (rb * 16 >= p.Kp) continue;
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = rb * 16 + acc_row(lane, 2 * half), col = acc_col(lane, nt, 0);
          sm80::store2(h_out + int64_t(r) * p.Vp + col0 + col, s[i][nt][2 * half], s[i][nt][2 * half + 1]);
        }
    }
    sm80::cp_async_wait<1>();
    sm80::sync_threads();

    // h <- exp(G_last) h + Kd^T V.
    const Bf16* kd = sKd + b * C * ldk;
    const Bf16* v = sV + b * C * lds;
    const float* decay = sDecay + b * p.Kp;
#pragma unroll
    for (int i = 0; i < kStateBlocks; ++i) {
      const int rb = warp + kWarps * i;
      if (rb * 16 >= p.Kp) continue;
      const float row_decay[2] = {decay[rb * 16 + acc_row(lane, 0)], decay[rb * 16 + acc_row(lane, 2)]};
      float acc[kTiles / 2][2][4];
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt / 2][nt % 2][e] = s[i][nt][e] * row_decay[e / 2];
      for (int kk = 0; kk < C / 16; ++kk) {
        uint32_t a[4];
        load_a_trans(a, kd, ldk, rb * 16, kk * 16, lane);
#pragma unroll
        for (int q = 0; q < kTiles / 2; ++q) {
          uint32_t bb[4];
          load_b_kn(bb, v, lds, kk * 16, q * 16, lane);
          mma_16x16(acc[q], a, bb);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][nt][e] = acc[nt / 2][nt % 2][e];
    }
    // The next chunk's prefetch overwrites this chunk's buffers.
    sm80::sync_threads();
  }

  if (!p.final_state) return;
#pragma unroll
  for (int i = 0; i < kStateBlocks; ++i)
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = (warp + kWarps * i) * 16 + acc_row(lane, e), col = col0 + acc_col(lane, nt, e);
        if (r < p.K && col < p.V) p.final_state[state_at + r * p.state_row + col * p.state_col] = s[i][nt][e];
      }
}

}  // namespace attnzoo::cuda_gla_chunk
