#pragma once
// The device side of the RWKV-7 recurrence. Per token, with the state S [K, V] of one head:
//   sa = a^T S;   S <- diag(exp(w)) S + b sa^T + k v^T;   o = S^T (scale r)
// Every column of S evolves on its own (sa_j and v_j are per column), so splitting V over CTAs needs no traffic
// between them; the rows meet in two sums per token (sa, then o).
//
// Work split as the delta kernel's (delta_recurrent_kernel.cuh, recurrent_split.h): a unit per (sequence, head, slice
// of kCols = 32 state columns), several units to a CTA when K is small; warp w of a unit holds state rows
// [R w, R w + R) of the slice, lane c column c, one float per row in registers (R = kRows, 16 or 32 as the plan picks
// for K). A warp's load of a state row is one coalesced 128-byte segment; r, exp(w), k, a and b of a token are staged
// in shared memory (the unit's thread i stages row i) and read as broadcasts. Two barriers per token, shared by the
// CTA's units: the first publishes the token's staging (and the last token's output shares, summed by the unit's warp 0
// then), the second the shares of sa. The state is read once before the first token and written once after the last.
// The staging is sized by the block (dynamic shared memory): RWKV-7's 64-row heads pack two units into a 4-warp, 6 KiB
// block.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/common/cuda/recurrent_split.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"

namespace attnzoo::cuda_rwkv7 {

using cuda_linear::bits_to_float;
using cuda_linear::load_bits;
using cuda_linear::load_state_column;
using cuda_linear::recurrent_cta;
using cuda_linear::RecurrentCta;
using cuda_linear::store_state_column;
using cuda_linear::store_elem;

// The shared staging, carved from the launch's dynamic shared memory: kStageArrays arrays of one float per
// thread (stage_bytes), so a block's share grows with K. A token's inputs (one float per key row) are
// double-buffered by token parity: the next token's staging then needs no barrier against threads still applying
// this token's update. The per-thread shares of sa and o have one buffer each: a token's sa shares are read before
// the next token's first barrier and written after it; its o shares are written after the second barrier and read
// between the next token's two.
struct Stage {
  enum Input { r, decay, k, a, b };
  float* base;
  int threads;
  __device__ float* input(Input which, int buf) const { return base + (2 * int(which) + buf) * threads; }
  __device__ float* sa() const { return base + 10 * threads; }
  __device__ float* o() const { return base + 11 * threads; }
};

// The unit's warp 0 lanes each sum their column's o shares over the unit's warps and store the token's output row.
__device__ __forceinline__ void store_output(const Params& p, const Stage& st, int base, int warps, int lane,
                                             int64_t at) {
  float o = 0.f;
  for (int w = 0; w < warps; ++w) o += st.o()[base + w * 32 + lane];
  store_elem(p.o, p.o_t, at, o);
}

// One instantiation per rows per thread; rwkv7_recurrent.cu makes each its own kernel, so each keeps its own
// register count.
template <int kRows>
__device__ __forceinline__ void rwkv7_recurrent_rows(const Params& p, unsigned char* smem) {
  const Stage st{reinterpret_cast<float*>(smem), int(blockDim.x)};
  RecurrentCta cta = recurrent_cta(kRows, p.units, p.total_units, p.slices, p.H, p.V, p.T, p.seq_offsets);
  const int tid = int(threadIdx.x), lane = cta.tid % 32, warps = int(blockDim.x) / p.units / 32, base = cta.base;
  // A pool-addressed state (ssm_state_indices): a negative row is a padded batch row, whose unit touches nothing
  // but still keeps the CTA's barriers.
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[cta.n]) : cta.n;
  if (slot < 0) cta.idle();
  const int64_t begin = cta.begin, length = cta.length;
  const int h = cta.head, col = cta.col, row0 = base + cta.row0;  // row0: the warp's first row in the staging
  const bool has_col = cta.has_col, stores = cta.tid < 32 && has_col;

  // Element (row 0, col) of this head's state; rows are p.V apart.
  const int64_t state_at = (slot < 0 ? 0 : slot) * p.state_stride + int64_t(h) * p.K * p.V + col;
  float s[kRows];
  load_state_column(s, p.initial_state ? p.initial_state + state_at : nullptr, p.K, p.V, cta);

  for (int64_t t = 0; t < cta.steps; ++t) {
    const int buf = int(t & 1);
    const bool active = t < length;  // uniform over the unit
    const int64_t row = begin + t;
    // A unit is K rounded up to whole warps; the rows past K stage zeros (a decay of 0 too, so the zero state
    // rows there stay zero), and the loops below need no bound. Every input of the token leaves before any is
    // converted (load_bits): a conversion waits for its load.
    const bool has_row = active && cta.tid < p.K;
    uint32_t r_bits = 0u, w_bits = 0u, k_bits = 0u, a_bits = 0u, b_bits = 0u;
    if (has_row) {
      const int64_t at = (row * p.H + h) * p.K + cta.tid;
      r_bits = load_bits(p.r, p.r_t, at);
      w_bits = load_bits(p.w, p.w_t, at);
      k_bits = load_bits(p.k, p.k_t, at);
      a_bits = load_bits(p.a, p.a_t, at);
      b_bits = load_bits(p.b, p.b_t, at);
    }
    const uint32_t v_bits = active && has_col ? load_bits(p.v, p.v_t, (row * p.H + h) * p.V + col) : 0u;
    float rx = 0.f, decay = 0.f, kx = 0.f, ax = 0.f, bx = 0.f;
    if (has_row) {
      rx = bits_to_float(r_bits, p.r_t) * p.scale;
      decay = expf(bits_to_float(w_bits, p.w_t));
      kx = bits_to_float(k_bits, p.k_t);
      ax = bits_to_float(a_bits, p.a_t);
      bx = bits_to_float(b_bits, p.b_t);
    }
    float *const r_s = st.input(Stage::r, buf), *const decay_s = st.input(Stage::decay, buf);
    float *const k_s = st.input(Stage::k, buf), *const a_s = st.input(Stage::a, buf);
    float* const b_s = st.input(Stage::b, buf);
    r_s[tid] = rx, decay_s[tid] = decay, k_s[tid] = kx, a_s[tid] = ax, b_s[tid] = bx;
    const float v = bits_to_float(v_bits, p.v_t);
    __syncthreads();

    // The previous token's output, if this unit had one (its shares were written after that token's last barrier).
    if (t > 0 && t <= length && stores) store_output(p, st, base, warps, lane, ((row - 1) * p.H + h) * p.V + col);
    float sa = 0.f;
#pragma unroll
    for (int j = 0; j < kRows; ++j) sa = fmaf(a_s[row0 + j], s[j], sa);
    st.sa()[tid] = sa;
    __syncthreads();
    if (!active) continue;  // after the token's last barrier; an idle unit's state stays as it is

    float sa_all = 0.f;
    for (int w = 0; w < warps; ++w) sa_all += st.sa()[base + w * 32 + lane];
    float o = 0.f;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int r = row0 + j;
      s[j] = fmaf(k_s[r], v, fmaf(b_s[r], sa_all, decay_s[r] * s[j]));
      o = fmaf(r_s[r], s[j], o);
    }
    st.o()[tid] = o;
  }
  if (cta.steps > 0) {  // the last token's output for the units that ran to the CTA's last step
    __syncthreads();
    if (length == cta.steps && stores)
      store_output(p, st, base, warps, lane, ((begin + length - 1) * p.H + h) * p.V + col);
  }

  store_state_column(s, p.final_state ? p.final_state + state_at : nullptr, p.K, p.V, cta);
}

// The instantiation the plan picked (p.rows), for callers that run one CTA function for every plan (the kernel
// emulator); on the GPU both branches in one kernel would cost the larger one's registers.
__device__ __forceinline__ void rwkv7_recurrent_cta(const Params& p, unsigned char* smem) {
  if (p.rows == 16) return rwkv7_recurrent_rows<16>(p, smem);
  rwkv7_recurrent_rows<32>(p, smem);
}

}  // namespace attnzoo::cuda_rwkv7
