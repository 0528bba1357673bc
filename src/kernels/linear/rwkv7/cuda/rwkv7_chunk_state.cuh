#pragma once
// Kernel 2 of the chunked RWKV-7 (rwkv7_chunk_cuda.h): the only sequential part. A CTA owns one (sequence, head,
// slice of kStateCols = 32 state columns) and walks the sequence's chunks in order with its slice of the f32 state
// S [Kp x 32] in MMA accumulator registers (common/cuda/chunk_state_slice.cuh, as the delta rule's pass). Columns
// evolve independently (the low-rank read a^T S e_j feeds only column j), which is what lets V split over CTAs.
// Per chunk:
//   store S (bf16) for the output kernel;   SA = W S + U;   S <- e^{G_last} S + [k; b]-decayed^T [V; SA]
// one MMA chain over 2C rows for the update, since V and SA are adjacent rows of one tile. Everything a chunk reads
// comes by cp.async, issued a chunk ahead (W and U double-buffered; k, b, V and the decays once the previous
// chunk's update has read them). The state is read once and written once (in place is fine: no other CTA touches
// this slice), so with pool states (ssm_state_indices) the pool's slot is the only state memory touched.
#include <cstdint>

#include "kernels/linear/common/cuda/chunk_state_slice.cuh"
#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"

namespace attnzoo::cuda_rwkv7_chunk {

template <int C>
__device__ __forceinline__ void rwkv7_chunk_state(const Params& p, unsigned char* smem) {
  using namespace cuda_delta_chunk;
  const int Kp = p.Kp, Vp = p.Vp;
  const StateSmem L(C, Kp);
  Bf16* sW = reinterpret_cast<Bf16*>(smem + L.w);    // [2][C][ldk]
  float* sU = reinterpret_cast<float*>(smem + L.u);  // [2][C][kStateCols]
  Bf16* sKB = reinterpret_cast<Bf16*>(smem + L.kb);  // [2C][ldk]
  Bf16* sH = reinterpret_cast<Bf16*>(smem + L.h);
  Bf16* sVSA = reinterpret_cast<Bf16*>(smem + L.vsa);  // [2C][lds]: V, then SA
  float* sDecay = reinterpret_cast<float*>(smem + L.decay);
  const int ldk = pitch(Kp), lds = pitch(kStateCols);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  (void)tid;
  const StateSlice slice = state_slice(Vp, p.H);
  const int64_t n = slice.n;
  const int h = slice.hv, col0 = slice.col0;

  const int64_t row = sequence_state_at(p.state_indices, n, p.state_stride);
  if (row < 0) return;  // a pad: its chunks' intra and output passes return too
  StateRegs s;
  const int64_t state_at = row + h * int64_t(p.K) * p.V;
  load_state(s, p.initial_state ? p.initial_state + state_at : nullptr, p.V, 1, p.K, p.V, col0, warp, lane);

  const int first = p.seq_chunks[n], end = p.seq_chunks[n + 1];
  auto fetch_w_u = [&](int c, int b) {
    const int64_t c_h = int64_t(c) * p.H + h;
    copy_rows(sW + b * C * ldk, ldk, p.wm + c_h * rows_elems(C, Kp), C, Kp);
    copy_rows(sU + b * C * kStateCols, kStateCols * 4, p.u + c_h * rows_elems(C, Vp) + col0, int64_t(Vp) * 4, C,
              kStateCols * 4);
  };
  auto fetch_kb_v = [&](int c) {
    const int64_t c_h = int64_t(c) * p.H + h;
    copy_rows(sKB, ldk, p.kb + c_h * rows_elems(2 * C, Kp), 2 * C, Kp);
    copy_rows(sVSA, lds * 2, p.vsa + c_h * rows_elems(2 * C, Vp) + col0, int64_t(Vp) * 2, C, kStateCols * 2);
    copy_rows(sDecay, Kp * 4, p.decay + c_h * Kp, Kp * 4, 1, Kp * 4);
  };
  // Groups in flight at the top of chunk c: W / U of c, then k, b, V and the decays of c.
  if (first < end) {
    fetch_w_u(first, 0);
    sm80::cp_async_commit();
    fetch_kb_v(first);
    sm80::cp_async_commit();
  }

  for (int c = first; c < end; ++c) {
    const int b = (c - first) & 1;
    const int64_t c_h = int64_t(c) * p.H + h;
    // The other buffers were last read by chunk c - 1's SA, which a barrier has closed.
    if (c + 1 < end) fetch_w_u(c + 1, b ^ 1);
    sm80::cp_async_commit();  // possibly empty, so that "all but the newest group" is always chunk c's

    store_h(s, reinterpret_cast<Bf16*>(p.h) + c_h * rows_elems(Kp, Vp), Vp, col0, Kp, sH, lds, warp, lane);
    sm80::cp_async_wait<1>();
    sm80::sync_threads();

    // SA = W S + U: warp w computes token rows [16 w, 16 w + 16) of the slice, into rows C.. of [V; SA].
    const Bf16* w = sW + b * C * ldk;
    const float* u = sU + b * C * kStateCols;
    Bf16* sa_out = reinterpret_cast<Bf16*>(p.vsa) + c_h * rows_elems(2 * C, Vp) + int64_t(C) * Vp;
    w_times_h<C>(w, ldk, sH, lds, Kp, warp, lane, [&](int i, int col, float ws0, float ws1) {
      const float x0 = u[i * kStateCols + col] + ws0, x1 = u[i * kStateCols + col + 1] + ws1;
      put2(sVSA + (C + i) * lds + col, x0, x1);
      sm80::store2(sa_out + int64_t(i) * Vp + col0 + col, x0, x1);
    });
    sm80::sync_threads();

    // S <- e^{G_last} S + [k; b]-decayed^T [V; SA], the decay applied after S was read for W S (and stored).
    decay_and_add<2 * C>(s, sKB, ldk, sVSA, lds, Kp, [&](int r) { return sDecay[r]; }, warp, lane);
    // The next chunk overwrites sH and (once every warp is done with them) sKB, sVSA and sDecay.
    sm80::sync_threads();
    if (c + 1 < end) fetch_kb_v(c + 1);
    sm80::cp_async_commit();
  }

  if (p.final_state) store_state(s, p.final_state + state_at, p.V, 1, p.K, p.V, col0, warp, lane);
}

}  // namespace attnzoo::cuda_rwkv7_chunk
