#pragma once
// The device side of the CUDA decode. One CTA (4 warps) reads keys [k_begin, k_end) of one sequence for one kv
// head, 64 keys a tile (32 at head_dim 256), and serves 16 * M of the Tq * G query rows sharing that head (row
// x is token x / G, head hk * G + x % G). K / V tiles stream through a cp.async ring of kStages buffers; each
// key's physical block is resolved through the block table one tile before its copy is issued, so the
// table's latency hides behind a tile of work. Warps split the tile: with M = 1 every warp scores the same 16
// rows against its own 16 keys; with M = 4 every warp owns 16 rows and all keys. Each warp keeps its own
// online softmax, and the warps' (max, sum, output) are combined through shared memory at the end.
//
// int8 / e4m3 caches arrive as bytes, are widened in shared memory to q's type (exactly: every such value is
// a bf16 and an f16) and run through the same tensor-core path; each key's scale multiplies its scores (K)
// and its softmax weights (V) in f32.
#include <cstdint>

#include "kernels/softmax/cuda/decode_convert.cuh"
#include "kernels/softmax/cuda/decode_params.h"
#include "kernels/softmax/cuda/online_softmax.cuh"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_decode {

template <class Out>
__device__ __forceinline__ Out* out_row(const DecodeParams& p, int b, int x, int hk) {
  const int tq = x / p.group, h = hk * p.group + x % p.group;
  return static_cast<Out*>(p.o) + (int64_t(b) * p.o_batch + int64_t(tq) * p.o_token + int64_t(h) * p.o_head);
}

template <class Elem, class KvT, int D, int M>
__device__ __forceinline__ void decode_chunk(const DecodeParams& p, unsigned char* smem) {
  using S = ChunkShape<D, M, KvT>;
  constexpr int kTile = S::kTile, kStages = S::kStages, P = S::kPitch;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const WorkItem w = p.work[blockIdx.x];
  const int row0 = int(blockIdx.y) * S::kRows, G = p.group;
  const int n_tiles = w.k_end > w.k_begin ? (w.k_end - w.k_begin + kTile - 1) / kTile : 0;

  Elem* sQ = reinterpret_cast<Elem*>(smem);
  int2* sRows = reinterpret_cast<int2*>(smem + S::kQBytes);  // [2][kTile]: tile j's keys in half j % 2
  unsigned char* pipe = smem + S::kQBytes + S::kRowsBytes;
  // 16-bit cache: stage st holds K then V. Bytes: the raw stages, then their scales, then one widened K, V pair.
  auto stage_k = [&](int st) { return reinterpret_cast<Elem*>(pipe) + st * 2 * kTile * P; };
  auto raw_k = [&](int st) { return pipe + st * 2 * S::kRawBytes; };
  float* sKScale = reinterpret_cast<float*>(pipe + kStages * 2 * S::kRawBytes);  // [kStages][kTile]
  float* sVScale = sKScale + kStages * kTile;
  Elem* sKWide = reinterpret_cast<Elem*>(pipe + kStages * (2 * S::kRawBytes + 2 * kTile * 4));
  Elem* sVWide = sKWide + kTile * P;

  const KvT* k = static_cast<const KvT*>(p.k);
  const KvT* v = static_cast<const KvT*>(p.v);
  const int64_t k_head = int64_t(w.hk) * p.k_head, v_head = int64_t(w.hk) * p.v_head;
  const int64_t ks_head = int64_t(w.hk) * p.ks_head, vs_head = int64_t(w.hk) * p.vs_head;

  // Query rows; rows past Tq * G are zero-filled and never stored.
  {
    // Pieces tid, tid + kThreads, ... of the rows read row-major (a 12-piece row at D = 96 does not divide the CTA).
    constexpr int kChunks = D / 8;
    for (int piece = tid; piece < S::kRows * kChunks; piece += kThreads) {
      const int r = piece / kChunks, c = piece % kChunks, x = row0 + r;
      const bool valid = x < p.rows;
      const int tq = valid ? x / G : 0, h = w.hk * G + (valid ? x % G : 0);
      const Elem* src = static_cast<const Elem*>(p.q) +
                        (int64_t(w.b) * p.q_batch + int64_t(tq) * p.q_token + int64_t(h) * p.q_head + c * 8);
      sm80::cp_async_16(sm80::smem_u32(sQ + r * P + c * 8), src, valid);
    }
    sm80::cp_async_commit();
  }

  // Key tid of tile j: its physical block (-1 past the chunk: never looked up, since table entries past a
  // sequence's last block may be garbage) and its row inside the block.
  auto fetch_rows = [&](int j) {
    int2 at = make_int2(-1, 0);
    const int pos = w.k_begin + j * kTile + tid;
    if (tid < kTile && pos < w.k_end) {
      const int blk = pos / p.block_size;
      at.y = pos - blk * p.block_size;
      at.x = p.block_table ? p.block_table[int64_t(w.b) * p.max_blocks_per_seq + blk] : w.b;
    }
    return at;
  };
  auto store_rows = [&](int j, int2 at) {
    if (tid < kTile) sRows[(j & 1) * kTile + tid] = at;
  };

  // Tile j's K and V rows (and their scales) into stage st. Each thread copies 16-byte piece c of every
  // kStep-th row, so one warp instruction reads whole rows (two 256-byte rows at D = 128, bf16): full sectors.
  auto issue = [&](int j, int st) {
    constexpr int kChunks = D * int(sizeof(KvT)) / 16, kElems = 16 / int(sizeof(KvT));
    // Where a row's pieces divide the CTA, a thread keeps one column (kStep rows apart); else (D = 96: 12 pieces
    // of 16 bits, 6 of 8) thread tid takes pieces tid, tid + kThreads, ... of the tile read row-major.
    constexpr bool kFixedColumn = kThreads % kChunks == 0;
    constexpr int kStep = kFixedColumn ? kThreads / kChunks : 0;
    static_assert(kFixedColumn ? kTile % kStep == 0 : kTile * kChunks % kThreads == 0);
    constexpr int kRowBytes = S::kQuant ? D : P * 2;
    const int2* rows = sRows + (j & 1) * kTile;
    const uint32_t dk = S::kQuant ? sm80::smem_u32(raw_k(st)) : sm80::smem_u32(stage_k(st));
    const uint32_t dv = dk + (S::kQuant ? S::kRawBytes : S::kTileBytes);
#pragma unroll
    for (int i = 0; i < kTile * kChunks / kThreads; ++i) {
      const int r = kFixedColumn ? tid / kChunks + i * kStep : (tid + i * kThreads) / kChunks;
      const int c = kFixedColumn ? tid % kChunks : (tid + i * kThreads) % kChunks;
      const int2 at = rows[r];
      const bool valid = at.x >= 0;
      const int64_t blk = valid ? at.x : 0, in = at.y;
      const KvT* ks = valid ? k + (blk * p.k_block + in * p.k_token + k_head + c * kElems) : k;
      const KvT* vs = valid ? v + (blk * p.v_block + in * p.v_token + v_head + c * kElems) : v;
      sm80::cp_async_16(dk + r * kRowBytes + c * 16, ks, valid);
      sm80::cp_async_16(dv + r * kRowBytes + c * 16, vs, valid);
      if constexpr (S::kQuant) {
        if (c == 0) {  // zero scales past the chunk keep its zero rows at exactly zero
          const float* ksc = valid ? p.k_scale + (blk * p.ks_block + in * p.ks_token + ks_head) : p.k_scale;
          const float* vsc = valid ? p.v_scale + (blk * p.vs_block + in * p.vs_token + vs_head) : p.v_scale;
          sm80::cp_async_4(sm80::smem_u32(sKScale + st * kTile + r), ksc, valid);
          sm80::cp_async_4(sm80::smem_u32(sVScale + st * kTile + r), vsc, valid);
        }
      }
    }
  };

  // Raw stage st -> the widened K, V tiles.
  auto widen = [&](int st) {
    if constexpr (S::kQuant) {
      constexpr int kPieces = D / 16, kTotal = 2 * kTile * kPieces;
      static_assert(kTotal % kThreads == 0);
      // Two pieces at a time: enough loads in flight for shared memory, without the 8 x 16 bytes of registers
      // a full unroll holds on top of the output accumulator (which took the M = 4 kernels to 255).
#pragma unroll 2
      for (int i = 0; i < kTotal / kThreads; ++i) {
        const int idx = tid + i * kThreads, which = idx / (kTile * kPieces), rest = idx % (kTile * kPieces);
        const int r = rest / kPieces, c = rest % kPieces;
        const uint4 raw = *reinterpret_cast<const uint4*>(raw_k(st) + which * S::kRawBytes + r * D + c * 16);
        uint4 lo, hi;
        convert::widen4<Elem, KvT>(raw.x, lo.x, lo.y);
        convert::widen4<Elem, KvT>(raw.y, lo.z, lo.w);
        convert::widen4<Elem, KvT>(raw.z, hi.x, hi.y);
        convert::widen4<Elem, KvT>(raw.w, hi.z, hi.w);
        Elem* dst = (which ? sVWide : sKWide) + r * P + c * 16;
        *reinterpret_cast<uint4*>(dst) = lo;
        *reinterpret_cast<uint4*>(dst + 8) = hi;
      }
    }
  };

  // Prologue: tiles 0 .. kStages-2 in flight, tile kStages-1's rows resolved. Each step reads one half of
  // sRows and writes the other; the barrier after it orders both against the next step.
  store_rows(0, fetch_rows(0));
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < n_tiles) issue(j, j);
    sm80::cp_async_commit();  // possibly empty, so that group arithmetic below never depends on n_tiles
    store_rows(j + 1, fetch_rows(j + 1));
    __syncthreads();
  }

  // This warp's 16 rows and its keys of each tile.
  const int mb = warp % M, key0 = (warp / M) * S::kWarpKeys;
  const bool active = row0 + mb * 16 < p.rows;  // warp-uniform: a block of padding rows skips the arithmetic
  int qpos[2];
  float slope_log2[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int x = row0 + mb * 16 + g + 8 * r;
    const bool valid = x < p.rows;
    qpos[r] = w.len - p.Tq + (valid ? x / G : p.Tq - 1);
    slope_log2[r] = p.alibi_slopes && valid ? p.alibi_slopes[w.hk * G + x % G] * kLog2e : 0.f;
  }
  // Positions of this CTA's first and last query: tiles wholly inside every row's band skip the mask.
  const int qlo = w.len - p.Tq + row0 / G;
  const int qhi = w.len - p.Tq + (min(p.rows, row0 + S::kRows) - 1) / G;

  // ldmatrix row addresses per lane. A (Q): matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15) in a0..a3 order. K for
  // S = Q K^T (B = K^T, n = key): b0, b1 of keys 0-7, then of keys 8-15. V for O += P V (B = V, k = key,
  // transposed load): b0, b1 of dims 0-7, then of dims 8-15.
  const int a_row = (lane % 8) + ((lane / 8) % 2) * 8, a_col = (lane / 16) * 8;
  const int k_row = (lane % 8) + (lane / 16) * 8, k_col = ((lane / 8) % 2) * 8;
  const int v_row = (lane % 8) + ((lane / 8) % 2) * 8, v_col = (lane / 16) * 8;
  const Elem* q_frag_base = sQ + (mb * 16 + a_row) * P + a_col;

  sm80::cp_async_wait<kStages - 1>();  // the query group: all but the kStages - 1 tile groups
  __syncthreads();
  [[maybe_unused]] uint32_t q_frag[S::kQInRegisters ? D / 16 : 1][4];
  if constexpr (S::kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) sm80::ldmatrix_x4(q_frag[kk], sm80::smem_u32(q_frag_base + kk * 16));
  }

  // Softmax state in log2 units, for this thread's rows g and g + 8; the sum is this thread's share (its
  // columns), the 4 threads of a row add up at the end.
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  float acc[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.f;

  for (int i = 0; i < n_tiles; ++i) {
    sm80::cp_async_wait<kStages - 2>();  // this thread's copies of tile i have landed
    __syncthreads();                     // everyone's have, and every warp is done with tile i - 1's buffers
    const int j = i + kStages - 1;
    if (j < n_tiles) issue(j, j % kStages);  // into the stage tile i - 1 used
    sm80::cp_async_commit();
    const int2 upcoming = fetch_rows(j + 1);  // the table read is in flight across this tile's arithmetic
    const int st = i % kStages;
    const Elem* kt = stage_k(st);
    const Elem* vt = kt + kTile * P;
    if constexpr (S::kQuant) {
      widen(st);
      __syncthreads();
      kt = sKWide;
      vt = sVWide;
    }

    if (active) {
      float sc[S::kWarpKeys / 8][4];
#pragma unroll
      for (int nb = 0; nb < S::kWarpKeys / 8; ++nb) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];
        if constexpr (S::kQInRegisters) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[e] = q_frag[kk][e];
        } else {
          sm80::ldmatrix_x4(a, sm80::smem_u32(q_frag_base + kk * 16));
        }
#pragma unroll
        for (int pair = 0; pair < S::kWarpKeys / 16; ++pair) {
          uint32_t b[4];
          sm80::ldmatrix_x4(b, sm80::smem_u32(kt + (key0 + pair * 16 + k_row) * P + kk * 16 + k_col));
          sm80::mma_16816<Elem>(sc[2 * pair], a, b[0], b[1]);
          sm80::mma_16816<Elem>(sc[2 * pair + 1], a, b[2], b[3]);
        }
      }

      // transform_score's order: (key scale,) scale, softcap, ALiBi; then the mask.
      const int kpos0 = w.k_begin + i * kTile + key0;
      const bool masked = kpos0 + S::kWarpKeys > w.k_end || (p.causal && kpos0 + S::kWarpKeys - 1 > qlo) ||
                          (p.window > 0 && kpos0 <= qhi - p.window);
#pragma unroll
      for (int nb = 0; nb < S::kWarpKeys / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = nb * 8 + 2 * t + (e & 1), kp = kpos0 + key, r = e / 2;
          float x = sc[nb][e];
          if constexpr (S::kQuant) x *= sKScale[st * kTile + key0 + key];
          x = p.softcap_log2 > 0.f ? p.softcap_log2 * tanhf(x * p.scale_over_softcap) : x * p.scale_log2;
          if (p.alibi_slopes) x -= slope_log2[r] * float(abs(qpos[r] - kp));
          if (masked) {
            const bool visible = kp < w.k_end && (!p.causal || kp <= qpos[r]) && (p.window <= 0 || kp > qpos[r] - p.window);
            if (!visible) x = -INFINITY;
          }
          sc[nb][e] = x;
        }
      }

      // Online softmax: the running max, the rescaled sums and accumulators, the weights (online_softmax.cuh).
      sm80::online_softmax_step(sc, acc, row_max, row_sum);

      // O += P V. The S accumulators of key columns 16kk..16kk+15 are exactly an A fragment: a0/a1 from n-block
      // 2kk (rows g, g+8), a2/a3 from n-block 2kk+1. A value's scale belongs to its key, i.e. to P's column.
#pragma unroll
      for (int kk = 0; kk < S::kWarpKeys / 16; ++kk) {
        float vs[4] = {1.f, 1.f, 1.f, 1.f};  // keys 2t, 2t+1, 2t+8, 2t+9 of this k step
        if constexpr (S::kQuant) {
          const float* sc_v = sVScale + st * kTile + key0 + kk * 16 + 2 * t;
          vs[0] = sc_v[0], vs[1] = sc_v[1], vs[2] = sc_v[8], vs[3] = sc_v[9];
        }
        const uint32_t a[4] = {sm80::pack2<Elem>(sc[2 * kk][0] * vs[0], sc[2 * kk][1] * vs[1]),
                               sm80::pack2<Elem>(sc[2 * kk][2] * vs[0], sc[2 * kk][3] * vs[1]),
                               sm80::pack2<Elem>(sc[2 * kk + 1][0] * vs[2], sc[2 * kk + 1][1] * vs[3]),
                               sm80::pack2<Elem>(sc[2 * kk + 1][2] * vs[2], sc[2 * kk + 1][3] * vs[3])};
#pragma unroll
        for (int pair = 0; pair < D / 16; ++pair) {
          uint32_t b[4];
          sm80::ldmatrix_x4_trans(b, sm80::smem_u32(vt + (key0 + kk * 16 + v_row) * P + pair * 16 + v_col));
          sm80::mma_16816<Elem>(acc[2 * pair], a, b[0], b[1]);
          sm80::mma_16816<Elem>(acc[2 * pair + 1], a, b[2], b[3]);
        }
      }
    }
    store_rows(j + 1, upcoming);  // the half read at iteration i - 1; read next at iteration i + 1
  }

  // Combine the warps. The ring's memory becomes the scratch: wait out every copy (the trailing groups are
  // empty, but wait_group 0 is what makes that certain) and every warp's last reads.
  sm80::cp_async_wait<0>();
  __syncthreads();
  constexpr int SP = S::kScratchPitch;
  float* scratch = reinterpret_cast<float*>(pipe);  // [kWarps][16][SP]
  float* s_max = scratch + kWarps * 16 * SP;         // [kWarps][16]
  float* s_sum = s_max + kWarps * 16;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += sm80::shfl_xor(row_sum[r], 1);
    row_sum[r] += sm80::shfl_xor(row_sum[r], 2);
  }
  {
    float* mine = scratch + warp * 16 * SP;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      *reinterpret_cast<float2*>(mine + g * SP + nd * 8 + 2 * t) = make_float2(acc[nd][0], acc[nd][1]);
      *reinterpret_cast<float2*>(mine + (g + 8) * SP + nd * 8 + 2 * t) = make_float2(acc[nd][2], acc[nd][3]);
    }
    if (t == 0) {
      s_max[warp * 16 + g] = row_max[0], s_max[warp * 16 + g + 8] = row_max[1];
      s_sum[warp * 16 + g] = row_sum[0], s_sum[warp * 16 + g + 8] = row_sum[1];
    }
  }
  __syncthreads();

  for (int idx = tid; idx < S::kRows * (D / 2); idx += kThreads) {
    const int lr = idx / (D / 2), d = (idx % (D / 2)) * 2, x = row0 + lr;
    if (x >= p.rows) continue;
    const int blk16 = lr / 16, r16 = lr % 16;
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < S::kSlices; ++s) m = fmaxf(m, s_max[(s * M + blk16) * 16 + r16]);
    float l = 0.f, o0 = 0.f, o1 = 0.f;
#pragma unroll
    for (int s = 0; s < S::kSlices; ++s) {
      const int at = (s * M + blk16) * 16 + r16;
      if (s_max[at] == -INFINITY) continue;  // saw nothing; also keeps -inf - -inf out of exp2
      const float f = exp2f(s_max[at] - m);
      l += f * s_sum[at];
      const float2 o = *reinterpret_cast<const float2*>(scratch + at * SP + d);
      o0 += f * o.x;
      o1 += f * o.y;
    }
    if (w.slot >= 0) {
      const int64_t prow = int64_t(w.slot) * p.rows + x;
      *reinterpret_cast<float2*>(p.part_o + prow * D + d) = make_float2(o0, o1);
      if (d == 0) p.part_m[prow] = m, p.part_l[prow] = l;
      continue;
    }
    // The sequence's only chunk: normalise here, the sink joining the denominator as one more logit.
    float inv = 0.f;
    if (p.sinks) {
      const float sink = p.sinks[w.hk * G + x % G] * kLog2e, top = fmaxf(m, sink);
      const float f = m == -INFINITY ? 0.f : exp2f(m - top);
      o0 *= f;
      o1 *= f;
      inv = 1.f / (l * f + exp2f(sink - top));
    } else if (l > 0.f) {
      inv = 1.f / l;
    }
    switch (p.out_type) {
      case OutType::f32: sm80::store2(out_row<float>(p, w.b, x, w.hk) + d, o0 * inv, o1 * inv); break;
      case OutType::bf16: sm80::store2(out_row<__nv_bfloat16>(p, w.b, x, w.hk) + d, o0 * inv, o1 * inv); break;
      case OutType::f16: sm80::store2(out_row<__half>(p, w.b, x, w.hk) + d, o0 * inv, o1 * inv); break;
    }
  }
}

// One query row x = blockIdx.y of one split (sequence, kv head) = merges[blockIdx.x]: the chunks' partial
// results by the log-sum-exp rule, the sink as one more logit, rows that saw nothing as zeros.
template <class Out>
__device__ __forceinline__ void merge_row(const DecodeParams& p) {
  const MergeItem mg = p.merges[blockIdx.x];
  const int x = int(blockIdx.y);
  const int64_t first = int64_t(mg.first_slot) * p.rows + x;
  float m = -INFINITY;
  for (int s = 0; s < mg.num_slots; ++s) m = fmaxf(m, p.part_m[first + int64_t(s) * p.rows]);
  const float sink = p.sinks ? p.sinks[mg.hk * p.group + x % p.group] * kLog2e : -INFINITY;
  const float top = fmaxf(m, sink);
  Out* dst = out_row<Out>(p, mg.b, x, mg.hk);
  for (int d = int(threadIdx.x); d < p.D; d += int(blockDim.x)) {
    float l = 0.f, o = 0.f;
    if (top != -INFINITY) {
      if (p.sinks) l = exp2f(sink - top);
      for (int s = 0; s < mg.num_slots; ++s) {
        const int64_t prow = first + int64_t(s) * p.rows;
        const float ms = p.part_m[prow];
        if (ms == -INFINITY) continue;
        const float f = exp2f(ms - top);
        l += f * p.part_l[prow];
        o += f * p.part_o[prow * p.D + d];
      }
    }
    sm80::store1(dst + d, l > 0.f ? o / l : 0.f);
  }
}

}  // namespace attnzoo::cuda_decode
