#pragma once
// Kernel 2 of the chunked delta rule (delta_chunk_cuda.h): the only sequential part. A CTA owns one (sequence,
// value head, slice of kStateCols = 32 state columns) and walks the sequence's chunks in order with its slice of
// the f32 state h [Kp x 32] in MMA accumulator registers (chunk_state_slice.cuh: the steps GLA's pass shares). Per
// chunk:
//   store h (bf16) for the output kernel;   v_new = U - W h;   h <- exp(G_last) h + Kd^T v_new
// with Kd = K exp(G_last - G) from the intra kernel (for KDA G_last is per key channel: a decay per state row).
// Everything a chunk reads comes by cp.async, issued a chunk ahead (W and U double-buffered; Kd once the previous
// chunk's update has read it), so the chain from chunk to chunk is shared-memory and tensor-core work only. The
// state is read once before the first chunk and written once after the last (in place is fine: no other CTA
// touches this slice); with pool states that read and write are the sequence's slot, and a pad's CTA returns.
#include <cstdint>

#include "kernels/linear/common/cuda/chunk_state_slice.cuh"
#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"

namespace attnzoo::cuda_delta_chunk {

template <int C>
__device__ __forceinline__ void delta_chunk_state(const Params& p, unsigned char* smem) {
  const bool channel = p.channel;
  const StateSmem L(C, p.Kp);
  Bf16* sW = reinterpret_cast<Bf16*>(smem + L.w);  // [2][C][ldk]
  float* sU = reinterpret_cast<float*>(smem + L.u);  // [2][C][kStateCols]
  Bf16* sKd = reinterpret_cast<Bf16*>(smem + L.kd);
  Bf16* sH = reinterpret_cast<Bf16*>(smem + L.h);
  Bf16* sVn = reinterpret_cast<Bf16*>(smem + L.vn);
  float* sG = reinterpret_cast<float*>(smem + L.G);
  const int ldk = pitch(p.Kp), lds = pitch(kStateCols);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const StateSlice slice = state_slice(p.Vp, p.HV);
  const int64_t n = slice.n;
  const int hv = slice.hv, col0 = slice.col0;

  const int64_t row = sequence_state_at(p.state_indices, n, p.state_stride);
  if (row < 0) return;  // a pad: the output pass skips its chunks too
  StateRegs s;
  const int64_t state_at = row + hv * int64_t(p.K) * p.V;
  load_state(s, p.initial_state ? p.initial_state + state_at : nullptr, p.V, 1, p.K, p.V, col0, warp, lane);

  const int first = p.seq_chunks[n], end = p.seq_chunks[n + 1];
  // W and U of chunk c into buffer b; the slice's U columns are 128 contiguous bytes of each row.
  auto fetch_w_u = [&](int c, int b) {
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    copy_rows(sW + b * C * ldk, ldk, p.w + c_hv * w_elems(C, p.Kp), C, p.Kp);
    copy_rows(sU + b * C * kStateCols, kStateCols * 4, p.u + c_hv * u_elems(C, p.Vp) + col0, int64_t(p.Vp) * 4, C,
              kStateCols * 4);
  };
  auto fetch_kd = [&](int c) {
    copy_rows(sKd, ldk, p.kd + (int64_t(c) * p.HV + hv) * w_elems(C, p.Kp), C, p.Kp);
  };
  // Groups in flight at the top of chunk c: W / U of c, then Kd of c.
  if (first < end) {
    fetch_w_u(first, 0);
    sm80::cp_async_commit();
    fetch_kd(first);
    sm80::cp_async_commit();
  }

  for (int c = first; c < end; ++c) {
    const int b = (c - first) & 1;
    const ChunkDesc ch = p.chunks[c];
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    // The other buffers were last read by chunk c - 1's v_new, which a barrier has closed.
    if (c + 1 < end) fetch_w_u(c + 1, b ^ 1);
    sm80::cp_async_commit();  // possibly empty, so that "all but the newest group" is always chunk c's

    store_h(s, reinterpret_cast<Bf16*>(p.h) + c_hv * h_elems(p.Kp, p.Vp), p.Vp, col0, p.Kp, sH, lds, warp, lane);
    const int64_t last = ch.row + ch.len - 1;
    if (channel) {
      if (tid < p.Kp) sG[tid] = tid < p.K ? p.G[(last * p.HV + hv) * p.K + tid] : 0.f;
    } else if (tid == 0) {
      sG[0] = p.G ? p.G[last * p.HV + hv] : 0.f;
    }
    sm80::cp_async_wait<1>();
    sm80::sync_threads();

    // v_new = U - W h: warp w computes token rows [16 w, 16 w + 16) of the slice.
    const Bf16* w = sW + b * C * ldk;
    const float* u = sU + b * C * kStateCols;
    Bf16* vn_out = reinterpret_cast<Bf16*>(p.vnew) + c_hv * u_elems(C, p.Vp);
    w_times_h<C>(w, ldk, sH, lds, p.Kp, warp, lane, [&](int i, int col, float wh0, float wh1) {
      const float x0 = u[i * kStateCols + col] - wh0, x1 = u[i * kStateCols + col + 1] - wh1;
      put2(sVn + i * lds + col, x0, x1);
      sm80::store2(vn_out + int64_t(i) * p.Vp + col0 + col, x0, x1);
    });
    sm80::sync_threads();

    // h <- exp(G_last) h + Kd^T v_new, the decay applied after h was read for W h (and stored) above.
    const float decay = p.G && !channel ? expf(sG[0]) : 1.f;
    decay_and_add<C>(s, sKd, ldk, sVn, lds, p.Kp, [&](int r) { return channel ? expf(sG[r]) : decay; }, warp, lane);
    // The next chunk overwrites sH, sVn, sG and (once every warp is done with it) sKd.
    sm80::sync_threads();
    if (c + 1 < end) fetch_kd(c + 1);
    sm80::cp_async_commit();
  }

  if (p.final_state) store_state(s, p.final_state + state_at, p.V, 1, p.K, p.V, col0, warp, lane);
}

}  // namespace attnzoo::cuda_delta_chunk
