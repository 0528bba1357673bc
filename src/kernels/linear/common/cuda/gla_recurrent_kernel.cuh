#pragma once
// The device side of the gated linear recurrence. Per token, with a the decay (1, exp(g + g_gamma) per head or
// exp(g_r) per key row), k' = phi(k) and q' = scale phi(q):
//   S <- diag(a) S + k'^T v;   o = q' S;   with the normaliser z <- a z + k', o /= q' . z + 1e-10
// Decay, write and read touch each state element once, in one pass, as the CPU kernel does.
//
// Work split as the delta kernel's (delta_recurrent_kernel.cuh, recurrent_split.h): a unit per (sequence, value head,
// slice of kCols = 32 state columns), several units to a CTA when K is small, sharing its barriers; warp w of a unit
// holds state rows [R w, R w + R) of the slice, lane c column c, one float per row in registers (R = kRows, 16 or 32 as
// the plan picks for K). A warp's load of a state row is one coalesced 128-byte segment; k', q' and the channel decays
// of a token are staged in shared memory (the unit's thread i stages row i) and read as broadcasts; o is each thread's
// dot product over its rows plus a sum over the unit's warps through shared memory. The normaliser's z is per key row,
// not per column, so the unit's thread i keeps z_i in a register (every slice's unit recomputes it: K adds, cheaper
// than sharing it). The state is read once before the first token and written once after the last.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/common/cuda/recurrent_split.cuh"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/cuda/warp_reduce.cuh"
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo::cuda_gla {

using cuda_linear::bits_to_float;
using cuda_linear::load_bits;
using cuda_linear::load_state_column;
using cuda_linear::recurrent_cta;
using cuda_linear::RecurrentCta;
using cuda_linear::store_state_column;
using cuda_linear::store_elem;
using cuda_linear::warp_sum;

// Every stage is read before the token's second barrier and written before the next token's first, so one
// buffer serves all tokens.
struct Stage {
  float k[kMaxThreads], q[kMaxThreads], a[kMaxThreads];  // by the CTA's thread: unit u's rows from its first
  float den[kMaxWarps];      // per warp: its rows' share of q' . z
  float partial[kMaxThreads];  // per thread: its rows' share of q' S
};

__device__ __forceinline__ float feature(FeatureMap f, float x) {
  switch (f) {
    case FeatureMap::elu_plus_one: return x > 0.f ? x + 1.f : expf(x);
    case FeatureMap::relu: return fmaxf(x, 0.f);
    default: return x;
  }
}

// One instantiation per (gate, rows per thread); gla_recurrent.cu makes each its own kernel, so each keeps its
// own register count.
template <GateKind kGate, int kRows>
__device__ __forceinline__ void gla_recurrent_rows(const Params& p) {
  __shared__ Stage st;
  RecurrentCta cta = recurrent_cta(kRows, p.units, p.total_units, p.slices, p.HV, p.V, p.T, p.seq_offsets);
  const int tid = int(threadIdx.x), lane = cta.tid % 32, warps = int(blockDim.x) / p.units / 32;
  const int base = cta.base, warp0 = base / 32;
  // A pool-addressed state (ssm_state_indices): a negative row is a padded batch row, whose unit touches nothing
  // but still keeps the CTA's barriers.
  const int64_t n = cta.n;
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[n]) : n;
  if (slot < 0) cta.idle();
  const int64_t begin = cta.begin, length = cta.length;
  const int hv = cta.head, col = cta.col, row0 = base + cta.row0;  // row0: the warp's first row in the staging
  const bool has_col = cta.has_col;
  const int h = hv / p.group;
  const bool has_row = cta.live && cta.tid < p.K;  // the unit's thread i stages key row i

  // Element (row 0, col) of this head's state; rows are p.V apart.
  const int64_t state_at = (slot < 0 ? 0 : slot) * p.state_stride + int64_t(hv) * p.K * p.V + col;
  float s[kRows];
  load_state_column(s, p.initial_state ? p.initial_state + state_at : nullptr, p.K, p.V, cta);
  const int64_t z_at = (n * p.H + h) * p.K + cta.tid;
  float z = p.normalize && p.initial_z && has_row ? p.initial_z[z_at] : 0.f;
  const float gamma = kGate == GateKind::scalar && p.g_gamma ? p.g_gamma[hv] : 0.f;

  for (int64_t t = 0; t < cta.steps; ++t) {
    const bool active = t < length;  // uniform over the unit
    const int64_t row = begin + t;
    // A unit is K rounded up to whole warps; the rows past K stage zeros (a decay of 0 too, so nothing there
    // ever grows), and the loops below need no bound. Every input of the token leaves before any is converted
    // (load_bits): a conversion waits for its load.
    uint32_t k_bits = 0u, q_bits = 0u, g_bits = 0u;
    if (active && has_row) {
      const int64_t at = (row * p.H + h) * p.K + cta.tid;
      k_bits = load_bits(p.k, p.k_t, at);
      q_bits = load_bits(p.q, p.q_t, at);
      if (kGate == GateKind::channel) g_bits = load_bits(p.g, p.g_t, (row * p.HV + hv) * p.K + cta.tid);
    }
    // A scalar decay is the same for every thread: each reads it (a broadcast load) instead of waiting on one.
    if (kGate == GateKind::scalar && active && p.g) g_bits = load_bits(p.g, p.g_t, row * p.HV + hv);
    const uint32_t v_bits = active && has_col ? load_bits(p.v, p.v_t, (row * p.HV + hv) * p.V + col) : 0u;
    float kx = 0.f, qx = 0.f, a = 1.f;
    if (active && has_row) {
      kx = feature(p.feature_map, bits_to_float(k_bits, p.k_t));
      qx = feature(p.feature_map, bits_to_float(q_bits, p.q_t)) * p.scale;
    }
    if (kGate == GateKind::scalar && active) a = expf(p.g ? gamma + bits_to_float(g_bits, p.g_t) : gamma);
    if (kGate == GateKind::channel) {
      a = active && has_row ? expf(bits_to_float(g_bits, p.g_t)) : 0.f;
      st.a[tid] = a;
    }
    st.k[tid] = kx;
    st.q[tid] = qx;
    if (p.normalize) {
      if (active) z = fmaf(a, z, kx);
      const float den = warp_sum(qx * z);
      if (lane == 0) st.den[tid / 32] = den;
    }
    const float v = bits_to_float(v_bits, p.v_t);
    __syncthreads();

    float den_all = 0.f;
    if (p.normalize && cta.tid < 32)
      for (int w = warp0; w < warp0 + warps; ++w) den_all += st.den[w];
    float acc = 0.f;
    if (active) {
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        const int r = row0 + j;
        const float decay = kGate == GateKind::channel ? st.a[r] : a;
        s[j] = fmaf(decay, s[j], st.k[r] * v);
        acc = fmaf(st.q[r], s[j], acc);
      }
    }
    st.partial[tid] = acc;
    __syncthreads();

    if (active && cta.tid < 32 && has_col) {
      float o = 0.f;
      for (int w = 0; w < warps; ++w) o += st.partial[base + w * 32 + lane];
      if (p.normalize) o *= 1.f / (den_all + 1e-10f);
      store_elem(p.o, p.o_t, (row * p.HV + hv) * p.V + col, o);
    }
  }

  // Every value head of a group carries the same z; the first one's first slice writes it.
  if (p.normalize && p.final_z && has_row && cta.slice == 0 && hv % p.group == 0) p.final_z[z_at] = z;
  store_state_column(s, p.final_state ? p.final_state + state_at : nullptr, p.K, p.V, cta);
}

// The instantiation the plan picked (p.rows), for callers that run one CTA function for every plan (the kernel
// emulator); on the GPU both branches in one kernel would cost the larger one's registers.
template <GateKind kGate>
__device__ __forceinline__ void gla_recurrent_cta(const Params& p) {
  if (p.rows == 16) return gla_recurrent_rows<kGate, 16>(p);
  gla_recurrent_rows<kGate, 32>(p);
}

}  // namespace attnzoo::cuda_gla
