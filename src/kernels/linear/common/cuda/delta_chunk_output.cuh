#pragma once
// Kernel 3 of the chunked delta rule (delta_chunk_cuda.h): per (chunk, value head), with h the state before the
// chunk and v_new from the state pass,
//   o = exp(G) . (Q h) + P v_new,   P = tril(Q K^T . Gamma) (diagonal included)
// Q is scaled (and l2-normed) as it is staged; exp(G_i) <= 1 scales the accumulator rows of Q h rather than Q,
// and Gamma_ij = exp(G_i - G_j) is applied to the f32 scores before they are rounded for the second product.
// KDA (G per key channel) takes P from channel_gram and stages Q . exp(G) as a second tile for Q h.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_gram.cuh"
#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"

namespace attnzoo::cuda_delta_chunk {

// chunk_output's default epilogue: each output element stored as computed.
struct AsComputed {
  __device__ __forceinline__ float operator()(int64_t /*row*/, int /*hv*/, int /*col*/, float o) const { return o; }
};

// chunk_output's values from scratch: the bf16 [C x Vp] rows per (chunk, value head) an earlier kernel wrote,
// brought by cp.async (committed and waited for with h).
struct ScratchValues {
  const uint16_t* rows;
  int Vp;
  __device__ __forceinline__ void operator()(Bf16* dst, int ld, int64_t c_hv, int C, const ChunkDesc& /*ch*/,
                                             int /*hv*/) const {
    copy_rows(dst, ld, rows + c_hv * u_elems(C, Vp), C, Vp);
  }
};

// The body, shared with the gated linear recurrence's output kernel (gla_chunk_output.cuh), whose parameters
// carry the same fields: `values` stages the bf16 [C x Vp] rows the scores multiply (v_new from scratch here, V
// there) into a tile (dst, ld) for (chunk c_hv / HV, value head hv) before the first barrier, `phi` maps each q and k element as it is staged (identity here, the feature map there), `out`
// maps each f32 output element (token row, value head, column, value) as it is stored (Mamba-2's skip and gate).
// `scores`, where given, are Q K^T's f32 [C x C] per (chunk, key head), formed once for the key head's group
// (gla_chunk_keys.cuh; blocks on and below the diagonal): K is then not staged and the first product skipped.
// `queries`, where given, are the same kernel's bf16 [C x Kp] phi(Q) scale per (chunk, key head), copied into
// the Q tile instead of staging q again.
template <int C, class P, class Values, class Map, class Out = AsComputed>
__device__ __forceinline__ void chunk_output(const P& p, const Values& values, const float* scores,
                                             const uint16_t* queries, bool l2norm, const Map& phi,
                                             unsigned char* smem, const Out& out = {}) {
  constexpr int kBlocks = C / 16;
  const bool channel = p.channel;
  const OutputSmem L(C, p.Kp, p.Vp, channel, /*keys=*/!scores);
  Bf16* sQ = reinterpret_cast<Bf16*>(smem + L.q);
  Bf16* sK = reinterpret_cast<Bf16*>(smem + L.k);
  Bf16* sP = reinterpret_cast<Bf16*>(smem + L.p);
  Bf16* sH = reinterpret_cast<Bf16*>(smem + L.h);
  Bf16* sVn = reinterpret_cast<Bf16*>(smem + L.vn);
  float* sG = reinterpret_cast<float*>(smem + L.G);
  Bf16* sLeft = reinterpret_cast<Bf16*>(smem + L.left);
  Bf16* sRight = reinterpret_cast<Bf16*>(smem + L.right);
  const int ldk = pitch(p.Kp), ldv = pitch(p.Vp), ldc = pitch(C);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int64_t c_hv = blockIdx.x;
  const int hv = int(c_hv % p.HV);
  const ChunkDesc ch = p.chunks[c_hv / p.HV];
  const int h = hv / p.group, len = ch.len;
  if (p.state_indices && p.state_indices[ch.seq] < 0) return;  // a pad's chunk: its state pass stored no h

  copy_rows(sH, ldv, p.h + c_hv * h_elems(p.Kp, p.Vp), p.Kp, p.Vp);
  values(sVn, ldv, c_hv, C, ch, hv);
  if (queries) copy_rows(sQ, ldk, queries + (c_hv / p.HV * p.H + h) * int64_t(C) * p.Kp, C, p.Kp);
  sm80::cp_async_commit();
  if (channel) {
    for (int e = tid; e < C * p.Kp; e += kThreads) {
      const int i = min(e / p.Kp, len - 1), c = e % p.Kp;
      sG[e] = c < p.K ? p.G[((ch.row + i) * p.HV + hv) * p.K + c] : 0.f;
    }
  } else if (tid < C) {
    sG[tid] = p.G ? p.G[(ch.row + min(tid, len - 1)) * p.HV + hv] : 0.f;
  }
  const int64_t qk_first = (ch.row * p.H + h) * p.K, qk_stride = int64_t(p.H) * p.K;
  if (!queries) stage_rows(sQ, ldk, p.q, p.q_t, qk_first, qk_stride, len, C, p.K, p.Kp, l2norm, p.scale, One{}, phi);
  if (!scores) stage_rows(sK, ldk, p.k, p.k_t, qk_first, qk_stride, len, C, p.K, p.Kp, l2norm, 1.f, One{}, phi);
  sm80::sync_threads();

  if (channel) {
    channel_gram<C>(sQ, sK, ldk, sG, p.Kp, p.K, sLeft, sRight,
                    [&](int i, int j, float x) { sP[i * ldc + j] = __float2bfloat16_rn(j <= i ? x : 0.f); });
    stage_rows(sRight, ldk, p.q, p.q_t, qk_first, qk_stride, len, C, p.K, p.Kp, l2norm, p.scale,
               [&](int i, int c) { return expf(sG[i * p.Kp + c]); }, phi);
  }
  // P, lower blocks only: the second product stops at each row block's diagonal.
  if (scores) {
    const float* S = scores + (c_hv / p.HV * p.H + h) * int64_t(C) * C;
    for (int e = tid; e < C * C; e += kThreads) {
      const int i = e / C, j = e % C;
      if (j / 16 <= i / 16) sP[i * ldc + j] = __float2bfloat16_rn(j <= i ? S[e] * expf(sG[i] - sG[j]) : 0.f);
    }
  }
  if (!channel && !scores)
    lower_gram_blocks<C>(sQ, sK, ldk, p.Kp, warp, lane, [&](int i, int j, float a0, float a1) {
      const float x0 = j <= i ? a0 * expf(sG[i] - sG[j]) : 0.f;
      const float x1 = j + 1 <= i ? a1 * expf(sG[i] - sG[j + 1]) : 0.f;
      put2(sP + i * ldc + j, x0, x1);
    });
  sm80::cp_async_wait<0>();
  sm80::sync_threads();

  for (int task = warp; task < kBlocks * (p.Vp / 16); task += kWarps) {
    const int rb = task % kBlocks, n0 = task / kBlocks * 16;
    float acc[2][4];
    zero(acc);
    for (int k0 = 0; k0 < p.Kp; k0 += 16) {
      uint32_t a[4], b[4];
      load_a(a, channel ? sRight : sQ, ldk, rb * 16, k0, lane);
      load_b_kn(b, sH, ldv, k0, n0, lane);
      mma_16x16(acc, a, b);
    }
    const float decay[2] = {channel ? 1.f : expf(sG[rb * 16 + acc_row(lane, 0)]),
                            channel ? 1.f : expf(sG[rb * 16 + acc_row(lane, 2)])};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] *= decay[e / 2];
    for (int kk = 0; kk <= rb; ++kk) {
      uint32_t a[4], b[4];
      load_a(a, sP, ldc, rb * 16, kk * 16, lane);
      load_b_kn(b, sVn, ldv, kk * 16, n0, lane);
      mma_16x16(acc, a, b);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = rb * 16 + acc_row(lane, e), col = n0 + acc_col(lane, nt, e);
        if (i < len && col < p.V)
          cuda_linear::store_elem(p.o, p.o_t, ((ch.row + i) * p.HV + hv) * p.V + col,
                                  out(ch.row + i, hv, col, acc[nt][e]));
      }
  }
}

template <int C>
__device__ __forceinline__ void delta_chunk_output(const Params& p, unsigned char* smem) {
  chunk_output<C>(p, ScratchValues{p.vnew, p.Vp}, /*scores=*/nullptr, /*queries=*/nullptr, p.l2norm, Identity{},
                  smem);
}

}  // namespace attnzoo::cuda_delta_chunk
