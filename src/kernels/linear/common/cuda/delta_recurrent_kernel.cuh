#pragma once
// The device side of the delta-family recurrence. Per token, with a the decay (1, exp(g) or exp(g_r) per key
// row), kn = k / |k| and qn = scale q / |q| (norms only with use_qk_l2norm_in_kernel):
//   S <- a S;   p = S^T kn;   r = S^T qn;   u = beta (v - p);   o = r + (qn . kn) u;   S <- S + kn u^T
// o = r + (qn . kn) u is S_new^T qn without a second pass over S, as the CPU kernel does it.
//
// Work split (recurrent_split.h): a unit per (sequence, value head, slice of kCols = 32 state columns), several
// units to a CTA when K is small; warp w of a unit holds state rows [R w, R w + R) of the slice, lane c column c,
// one float per row in registers (R = kRows, 16 or 32 as the plan picks for K). So a warp's load of one state row
// is one coalesced 128-byte segment, p and r are per-thread dot products over the thread's rows plus a sum over the
// unit's warps through shared memory, and k, q and the decays of a token are staged in shared memory once (the
// unit's thread i stages row i) and read as broadcasts. The state is read once before the first token and written
// once after the last. The units of a CTA share its two barriers per token; each reads only its own stretch of the
// staging.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/delta_recurrent_launch.h"
#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/common/cuda/recurrent_split.cuh"
#include "kernels/linear/common/cuda/warp_reduce.cuh"
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo::cuda_delta {

using cuda_linear::bits_to_float;
using cuda_linear::kMaxUnits;
using cuda_linear::load_bits;
using cuda_linear::load_state_column;
using cuda_linear::recurrent_cta;
using cuda_linear::RecurrentCta;
using cuda_linear::store_state_column;
using cuda_linear::store_elem;
using cuda_linear::warp_sum;

// The token's inputs in shared memory, double-buffered by token parity: the next token's staging then needs no
// barrier against threads still applying this token's update (which reads k). Rows and shares are indexed by the
// CTA's thread, so unit u's rows start at its first thread; the scalars are per unit.
struct Stage {
  float k[2][kMaxThreads], q[2][kMaxThreads], a[2][kMaxThreads];
  float beta[2][kMaxUnits], a_head[2][kMaxUnits];
  float norms[kMaxWarps][3];  // per warp: |k|^2, |q|^2, q . k of the raw rows
  float2 partial[kMaxThreads];  // per thread: its rows' share of (S^T k, S^T q)
};

// One instantiation per (gate, rows per thread); delta_recurrent.cu makes each its own kernel, so each keeps its
// own register count.
template <DeltaGate kGate, int kRows>
__device__ __forceinline__ void delta_recurrent_rows(const Params& p) {
  __shared__ Stage st;
  RecurrentCta cta = recurrent_cta(kRows, p.units, p.total_units, p.slices, p.HV, p.V, p.T, p.seq_offsets);
  const int lane = cta.tid % 32, warps = (int(blockDim.x) / p.units) / 32, warp0 = cta.base / 32;
  const int tid = int(threadIdx.x), unit = cta.unit, base = cta.base;
  // A pool-addressed state (ssm_state_indices): a negative row is a padded batch row, whose unit touches nothing
  // but still keeps the CTA's barriers.
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[cta.n]) : cta.n;
  if (slot < 0) cta.idle();
  const int64_t begin = cta.begin, length = cta.length;
  const int hv = cta.head, col = cta.col, row0 = cta.row0;
  const bool has_col = cta.has_col;
  const int h = hv / p.group;

  // Element (row 0, col) of this head's state; rows are p.V apart.
  const int64_t state_at = (slot < 0 ? 0 : slot) * p.state_stride + int64_t(hv) * p.K * p.V + col;
  float s[kRows];
  load_state_column(s, p.initial_state ? p.initial_state + state_at : nullptr, p.K, p.V, cta);

  for (int64_t t = 0; t < cta.steps; ++t) {
    const int b = int(t & 1);
    const bool active = t < length;  // uniform over the unit
    const int64_t row = begin + t;
    // The unit's thread i stages key row i (a unit is K rounded up to whole warps; the rows past K stage zeros, so
    // the loops below need no bound) and its share of the norms. Every input of the token leaves before any is
    // converted (load_bits): a conversion waits for its load. Zero bits are 0.f in every dtype.
    const bool has_row = active && cta.tid < p.K;
    uint32_t k_bits = 0u, q_bits = 0u, g_bits = 0u, beta_bits = 0u, g_head_bits = 0u;
    if (has_row) {
      const int64_t at = (row * p.H + h) * p.K + cta.tid;
      k_bits = load_bits(p.k, p.k_t, at);
      q_bits = load_bits(p.q, p.q_t, at);
      if (kGate == DeltaGate::channel) g_bits = load_bits(p.g, p.g_t, (row * p.HV + hv) * p.K + cta.tid);
    }
    if (cta.tid == 0 && active) {
      if (p.beta) beta_bits = load_bits(p.beta, p.beta_t, row * p.HV + hv);
      if (kGate == DeltaGate::head) g_head_bits = load_bits(p.g, p.g_t, row * p.HV + hv);
    }
    const uint32_t v_bits = active && has_col ? load_bits(p.v, p.v_t, (row * p.HV + hv) * p.V + col) : 0u;
    const float kx = bits_to_float(k_bits, p.k_t), qx = bits_to_float(q_bits, p.q_t);
    // A decay of 0 past K keeps the zero state rows there zero (and never multiplies unstaged memory).
    if (kGate == DeltaGate::channel) st.a[b][tid] = has_row ? expf(bits_to_float(g_bits, p.g_t)) : 0.f;
    st.k[b][tid] = kx;
    st.q[b][tid] = qx;
    if (cta.tid == 0 && active) {
      st.beta[b][unit] = p.beta ? bits_to_float(beta_bits, p.beta_t) : 1.f;
      if (kGate == DeltaGate::head) st.a_head[b][unit] = expf(bits_to_float(g_head_bits, p.g_t));
    }
    const float kk = warp_sum(kx * kx), qq = warp_sum(qx * qx), qk = warp_sum(qx * kx);
    if (lane == 0) st.norms[tid / 32][0] = kk, st.norms[tid / 32][1] = qq, st.norms[tid / 32][2] = qk;
    const float v = bits_to_float(v_bits, p.v_t);
    __syncthreads();

    // The norms have one buffer: read before the barrier that lets a warp on to the next token's staging.
    float kk_all = 0.f, qq_all = 0.f, qk_all = 0.f;
    for (int w = warp0; w < warp0 + warps; ++w)
      kk_all += st.norms[w][0], qq_all += st.norms[w][1], qk_all += st.norms[w][2];
    float pk = 0.f, pq = 0.f;
    if (active) {
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        const int r = base + row0 + j;
        if (kGate == DeltaGate::head) s[j] *= st.a_head[b][unit];
        if (kGate == DeltaGate::channel) s[j] *= st.a[b][r];
        pk = fmaf(s[j], st.k[b][r], pk);
        pq = fmaf(s[j], st.q[b][r], pq);
      }
    }
    st.partial[tid] = make_float2(pk, pq);
    __syncthreads();
    if (!active) continue;  // after the token's last barrier

    // fla's l2norm: x / sqrt(|x|^2 + 1e-6); the scale folds into q's factor.
    const float k_norm = p.l2norm ? 1.f / sqrtf(kk_all + 1e-6f) : 1.f;
    const float q_norm = (p.l2norm ? 1.f / sqrtf(qq_all + 1e-6f) : 1.f) * p.scale;
    float pk_all = 0.f, pq_all = 0.f;
    for (int w = 0; w < warps; ++w) {
      const float2 x = st.partial[base + w * 32 + lane];
      pk_all += x.x, pq_all += x.y;
    }
    const float u = st.beta[b][unit] * (v - pk_all * k_norm);
    if (cta.tid < 32 && has_col)
      store_elem(p.o, p.o_t, (row * p.HV + hv) * p.V + col, fmaf(qk_all * k_norm * q_norm, u, pq_all * q_norm));
    const float ku = k_norm * u;
#pragma unroll
    for (int j = 0; j < kRows; ++j) s[j] = fmaf(st.k[b][base + row0 + j], ku, s[j]);
  }

  store_state_column(s, p.final_state ? p.final_state + state_at : nullptr, p.K, p.V, cta);
}

// The instantiation the plan picked (p.rows), for callers that run one CTA function for every plan (the kernel
// emulator); on the GPU both branches in one kernel would cost the larger one's registers.
template <DeltaGate kGate>
__device__ __forceinline__ void delta_recurrent_cta(const Params& p) {
  if (p.rows == 16) return delta_recurrent_rows<kGate, 16>(p);
  delta_recurrent_rows<kGate, 32>(p);
}

}  // namespace attnzoo::cuda_delta
