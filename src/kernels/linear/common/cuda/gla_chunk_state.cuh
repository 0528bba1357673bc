#pragma once
// Kernel 2 of the chunked gated linear recurrence (gla_chunk_cuda.h): the only sequential part. A CTA owns one
// (sequence, value head, slice of kStateCols = 32 state columns) and walks the sequence's chunks in order with
// its slice of the f32 state h [Kp x 32] in MMA accumulator registers (warp w holds row blocks w and w + 4), as
// the delta rule's state pass does (delta_chunk_state.cuh). Per chunk:
//   store h (bf16) for the output kernel;   h <- exp(G_last) h + Kd^T V
// with Kd = phi(K) exp(G_last - G) and exp(G_last) from the prep kernel (for GLA G_last is per key channel: a
// decay per state row). Kd, the V slice and the decays of the next chunk arrive by cp.async while this one is
// worked on, so the chain from chunk to chunk is shared-memory and tensor-core work only. With shared_keys the V
// slice is formed here from v and the prep's row factors (gla_chunk_prep.cuh): the next chunk's elements are
// loaded into registers before this chunk's update and rounded into shared memory after it.
#include <cstdint>

#include "kernels/linear/common/cuda/gla_chunk_tiles.cuh"

namespace attnzoo::cuda_gla_chunk {

// With shared_keys: a chunk's slice of the decayed values V . vscale, a thread per column (lane) and every
// kWarps-th row from its warp's, held as v and factor separately so that nothing waits on the loads until store().
template <int C>
struct DecayedValues {
  static constexpr int kRows = C / kWarps;
  float v[kRows], f[kRows];
  __device__ __forceinline__ void load(const Params& p, int64_t c, int hv, int col0, int warp, int lane) {
    const ChunkDesc ch = p.chunks[c];
    const float* factor = p.vscale + (c * p.HV + hv) * C;
    const int col = col0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = warp + r * kWarps;
      const bool in = i < ch.len && col < p.V;
      v[r] = in ? cuda_linear::load_elem(p.v, p.v_t, ((ch.row + i) * p.HV + hv) * p.V + col) : 0.f;
      f[r] = factor[i];  // zero past the chunk's tokens
    }
  }
  __device__ __forceinline__ void store(Bf16* dst, int ld, int warp, int lane) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) dst[(warp + r * kWarps) * ld + lane] = __float2bfloat16_rn(v[r] * f[r]);
  }
};

template <int C>
__device__ __forceinline__ void gla_chunk_state(const Params& p, unsigned char* smem) {
  const StateSmem L(C, p.Kp);
  Bf16* sKd = reinterpret_cast<Bf16*>(smem + L.kd);  // [2][C][ldk]
  Bf16* sV = reinterpret_cast<Bf16*>(smem + L.v);    // [2][C][lds]
  float* sDecay = reinterpret_cast<float*>(smem + L.decay);  // [2][Kp]
  const int ldk = pitch(p.Kp), lds = pitch(kStateCols);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const StateSlice slice = state_slice(p.Vp, p.HV);
  const int64_t n = slice.n;
  const int hv = slice.hv, col0 = slice.col0;

  const int64_t row = sequence_state_at(p.state_indices, n, p.state_stride);
  if (row < 0) return;  // a pad: the output pass skips its chunks too
  StateRegs s;
  const int64_t state_at = row + hv * int64_t(p.K) * p.V;
  load_state(s, p.initial_state ? p.initial_state + state_at : nullptr, p.state_row, p.state_col, p.K, p.V, col0,
             warp, lane);

  const int first = p.seq_chunks[n], end = p.seq_chunks[n + 1];
  // Kd, the slice's V columns (64 contiguous bytes of each row) and the row decays of chunk c into buffer b.
  // With shared_keys: the key head's phi(K), and the values come through `next` instead.
  auto fetch = [&](int c, int b) {
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    const int64_t c_k = p.shared_keys ? int64_t(c) * p.H + hv / p.group : c_hv;
    copy_rows(sKd + b * C * ldk, ldk, p.kd + c_k * kd_elems(C, p.Kp), C, p.Kp);
    if (!p.shared_keys)
      copy_rows(sV + b * C * lds, lds * 2, p.vb + c_hv * v_elems(C, p.Vp) + col0, int64_t(p.Vp) * 2, C,
                kStateCols * 2);
    copy_rows(sDecay + b * p.Kp, p.Kp * 4, p.decay + c_hv * p.Kp, p.Kp * 4, 1, p.Kp * 4);
  };
  DecayedValues<C> next;
  if (first < end) {
    fetch(first, 0);
    if (p.shared_keys) {
      next.load(p, first, hv, col0, warp, lane);
      next.store(sV, lds, warp, lane);
    }
  }
  sm80::cp_async_commit();

  for (int c = first; c < end; ++c) {
    const int b = (c - first) & 1;
    const int64_t c_hv = int64_t(c) * p.HV + hv;
    // The other buffers were last read by chunk c - 1's update, which a barrier has closed.
    if (c + 1 < end) fetch(c + 1, b ^ 1);
    sm80::cp_async_commit();  // possibly empty, so that "all but the newest group" is always chunk c's
    const bool values_ahead = p.shared_keys && c + 1 < end;
    if (values_ahead) next.load(p, c + 1, hv, col0, warp, lane);

    store_h(s, reinterpret_cast<Bf16*>(p.h) + c_hv * h_elems(p.Kp, p.Vp), p.Vp, col0, p.Kp, nullptr, lds, warp,
            lane);
    sm80::cp_async_wait<1>();
    sm80::sync_threads();

    // h <- exp(G_last) h + Kd^T V.
    const float* decay = sDecay + b * p.Kp;
    decay_and_add<C>(s, sKd + b * C * ldk, ldk, sV + b * C * lds, lds, p.Kp, [&](int r) { return decay[r]; }, warp,
                     lane);
    // The next chunk's prefetch overwrites this chunk's buffers.
    sm80::sync_threads();
    // Buffer b ^ 1 was last read by chunk c - 1's update; chunk c + 1's barrier orders these stores before its
    // update reads them.
    if (values_ahead) next.store(sV + (b ^ 1) * C * lds, lds, warp, lane);
  }

  if (p.final_state)
    store_state(s, p.final_state + state_at, p.state_row, p.state_col, p.K, p.V, col0, warp, lane);
}

}  // namespace attnzoo::cuda_gla_chunk
