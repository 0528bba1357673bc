#pragma once
// Kernel 2 of the chunked delta rule (delta_chunk_cuda.h): the only sequential part. A CTA owns one (sequence,
// value head, slice of kStateCols = 32 state columns) and walks the sequence's chunks in order with its slice of
// the f32 state h [Kp x 32] in MMA accumulator registers (warp w holds row blocks w and w + 4). Per chunk:
//   store h (bf16) for the output kernel;   v_new = U - W h;   h <- exp(G_last) h + Kd^T v_new
// with Kd = K exp(G_last - G) (each factor <= 1), staged from the raw keys here rather than kept as scratch.
// For KDA G_last and G are per key channel: Kd's factor is per element, the state's decay per row.
// The state is read once before the first chunk and written once after the last (in place is fine: no other
// CTA touches this slice).
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"

namespace attnzoo::cuda_delta_chunk {

constexpr int kStateBlocks = kMaxDim / 16 / kWarps;  // row blocks of h per warp

template <int C>
__device__ __forceinline__ void delta_chunk_state(const Params& p, unsigned char* smem) {
  constexpr int kTiles = kStateCols / 8;
  const bool channel = p.channel;
  const StateSmem L(C, p.Kp, channel);
  Bf16* sW = reinterpret_cast<Bf16*>(smem + L.w);
  Bf16* sKd = reinterpret_cast<Bf16*>(smem + L.kd);
  Bf16* sH = reinterpret_cast<Bf16*>(smem + L.h);
  Bf16* sVn = reinterpret_cast<Bf16*>(smem + L.vn);
  float* sG = reinterpret_cast<float*>(smem + L.G);
  const int ldk = pitch(p.Kp), lds = pitch(kStateCols);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int slices = p.Vp / kStateCols;
  int64_t cta = blockIdx.x;
  const int col0 = int(cta % slices) * kStateCols;
  cta /= slices;
  const int hv = int(cta % p.HV);
  const int64_t n = cta / p.HV;
  const int h = hv / p.group;

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
        s[i][nt][e] = p.initial_state && r < p.K && col < p.V ? p.initial_state[state_at + int64_t(r) * p.V + col] : 0.f;
      }

  for (int c = p.seq_chunks[n]; c < p.seq_chunks[n + 1]; ++c) {
    const ChunkDesc ch = p.chunks[c];
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    copy_rows(sW, ldk, p.w + c_hv * w_elems(C, p.Kp), C, p.Kp);
    sm80::cp_async_commit();

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
          const float x0 = s[i][nt][2 * half], x1 = s[i][nt][2 * half + 1];
          put2(sH + r * lds + col, x0, x1);
          sm80::store2(h_out + int64_t(r) * p.Vp + col0 + col, x0, x1);
        }
    }
    // Rows past the chunk repeat its last row, so row C - 1 is G_last.
    if (channel) {
      for (int e = tid; e < C * p.Kp; e += kThreads) {
        const int i = min(e / p.Kp, ch.len - 1), c = e % p.Kp;
        sG[e] = c < p.K ? p.G[((ch.row + i) * p.HV + hv) * p.K + c] : 0.f;
      }
    } else if (tid < C) {
      sG[tid] = p.G ? p.G[(ch.row + min(tid, ch.len - 1)) * p.HV + hv] : 0.f;
    }
    sm80::sync_threads();
    const float G_last = sG[C - 1];  // per-head gates
    const float* G_last_row = sG + (C - 1) * p.Kp;  // KDA
    stage_rows(sKd, ldk, p.k, p.k_t, (ch.row * p.H + h) * p.K, int64_t(p.H) * p.K, ch.len, C, p.K, p.Kp, p.l2norm,
               1.f, [&](int j, int c) {
                 return channel ? expf(G_last_row[c] - sG[j * p.Kp + c]) : expf(G_last - sG[j]);
               });
    sm80::cp_async_wait<0>();
    sm80::sync_threads();

    // v_new = U - W h: warp w computes token rows [16 w, 16 w + 16) of the slice.
    if (warp < C / 16) {
      float acc[kTiles / 2][2][4];
#pragma unroll
      for (int q = 0; q < kTiles / 2; ++q) zero(acc[q]);
      for (int k0 = 0; k0 < p.Kp; k0 += 16) {
        uint32_t a[4];
        load_a(a, sW, ldk, warp * 16, k0, lane);
#pragma unroll
        for (int q = 0; q < kTiles / 2; ++q) {
          uint32_t b[4];
          load_b_kn(b, sH, lds, k0, q * 16, lane);
          mma_16x16(acc[q], a, b);
        }
      }
      const float* u = p.u + c_hv * u_elems(C, p.Vp);
      Bf16* vn_out = reinterpret_cast<Bf16*>(p.vnew) + c_hv * u_elems(C, p.Vp);
#pragma unroll
      for (int q = 0; q < kTiles / 2; ++q)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int i = warp * 16 + acc_row(lane, 2 * half), col = q * 16 + acc_col(lane, nt, 0);
            const float* ui = u + int64_t(i) * p.Vp + col0 + col;
            const float x0 = ui[0] - acc[q][nt][2 * half], x1 = ui[1] - acc[q][nt][2 * half + 1];
            put2(sVn + i * lds + col, x0, x1);
            sm80::store2(vn_out + int64_t(i) * p.Vp + col0 + col, x0, x1);
          }
    }
    sm80::sync_threads();

    // h <- exp(G_last) h + Kd^T v_new, the decay applied after h was read for W h (and stored) above.
    const float decay = p.G && !channel ? expf(G_last) : 1.f;
#pragma unroll
    for (int i = 0; i < kStateBlocks; ++i) {
      const int rb = warp + kWarps * i;
      if (rb * 16 >= p.Kp) continue;
      float row_decay[2] = {decay, decay};
      if (channel)
        for (int half = 0; half < 2; ++half) row_decay[half] = expf(G_last_row[rb * 16 + acc_row(lane, 2 * half)]);
      float acc[kTiles / 2][2][4];
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt / 2][nt % 2][e] = s[i][nt][e] * row_decay[e / 2];
      for (int kk = 0; kk < C / 16; ++kk) {
        uint32_t a[4];
        load_a_trans(a, sKd, ldk, rb * 16, kk * 16, lane);
#pragma unroll
        for (int q = 0; q < kTiles / 2; ++q) {
          uint32_t b[4];
          load_b_kn(b, sVn, lds, kk * 16, q * 16, lane);
          mma_16x16(acc[q], a, b);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][nt][e] = acc[nt / 2][nt % 2][e];
    }
    // The next chunk overwrites every tile this one read.
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
        if (r < p.K && col < p.V) p.final_state[state_at + int64_t(r) * p.V + col] = s[i][nt][e];
      }
}

}  // namespace attnzoo::cuda_delta_chunk
