#pragma once
// The CUDA chunked RWKV-7's launch, decided on the host: the three kernels' parameters, grids, shared memory and
// scratch layout for a validated problem. Plain C++: rwkv7_chunk.cu uploads the chunk table, allocates the
// scratch and launches; the kernel emulator (testing/cuda_emulation) runs the same plan through the same device
// code (rwkv7_chunk_{intra,state,output}.cuh). The warp layout, tiles and chunk table are the delta family's
// (common/cuda/delta_chunk_launch.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/rwkv7/problem.h"

namespace attnzoo::cuda_rwkv7_chunk {

using cuda_delta_chunk::align16;
using cuda_delta_chunk::ChunkDesc;
using cuda_delta_chunk::kMaxDim;
using cuda_delta_chunk::kStateCols;
using cuda_delta_chunk::kThreads;
using cuda_delta_chunk::kWarps;
using cuda_delta_chunk::pitch;
using cuda_linear::Elem;
using cuda_linear::elem_of;

struct Params {
  const void *r, *w, *k, *v, *a, *b;
  void* o;
  Elem r_t, w_t, k_t, v_t, a_t, b_t, o_t;
  const float* initial_state;  // [N, H, K, V]; null: zeros
  float* final_state;          // [N, H, K, V]; null: not written; may be initial_state
  // Pool states (ssm_state_indices): sequence n's state is row state_indices[n], state_stride floats apart;
  // -1 a pad, whose chunks touch nothing. Null: row n of the dense states (state_stride H K V).
  const int32_t* state_indices;
  int64_t state_stride;
  const ChunkDesc* chunks;     // [n_chunks]
  const int32_t* seq_chunks;   // [N + 1]: sequence n owns chunks [seq_chunks[n], seq_chunks[n + 1])
  // Scratch per (chunk, head), bf16 held as raw bits so this header needs no CUDA; rows past the chunk are zero.
  uint16_t* wm;    // [C, Kp]: W = T (a e^{G_{i-1}})
  float* u;        // [C, Vp]: U = (T A_ak) V
  uint16_t* kb;    // [2C, Kp]: k e^{G_last - G_j}, then b e^{G_last - G_j}
  uint16_t* vsa;   // [2C, Vp]: V (intra), then SA = W S + U (state pass)
  uint16_t* qg;    // [C, Kp]: scale r e^{G_i}
  uint16_t* pm;    // [C, 2C]: [A_qk | A_qb], zero right of the diagonal
  float* decay;    // [Kp]: e^{G_last}, the chunk's decay of each state row
  uint16_t* h;     // [Kp, Vp]: the state before the chunk
  int64_t n_chunks;
  int H, K, V, Kp, Vp;  // Kp: K rounded up to 16; Vp: V rounded up to kStateCols
  float scale;
};

// Shared-memory layouts, in bytes, used by the kernels and by the host that sizes the launches. bf16 tile rows are
// padded as the delta family's (pitch()).
struct IntraSmem {
  // f32: G with a leading zero row ([C + 1, Kp]: row i is G_{i-1}), whose bytes T takes once the decays are folded
  // into every factor; A_ak, A_ab (negated, then inverted into T); the Gram's choice per diagonal block. Then one
  // region used twice: the staged q, k, a, b tiles and the Gram's sub-chunk factors (left [32] rows: q's and a's,
  // right [C]: k's, then b's), and after the Grams the factors of W and U (a e^{G_{i-1}}, V, T and T A_ak in
  // bf16; the substitution's block row of partial sums in T's bf16 bytes before they are written). ~98 KB at
  // K = V = 64 with 64-token chunks (sm_86 / sm_89 allow 99 KB; an H100 fits two blocks per SM), ~158 KB at
  // K = V = 128.
  size_t G, t, ak, ab, on_cores, region, q, k, a, b, left, right, ae, v, tb, x, ta, bytes;
  constexpr IntraSmem(int C, int Kp, int Vp)
      : G(0),
        t(0),
        ak(std::max(align16(G + size_t(C + 1) * Kp * 4), align16(t + size_t(C) * C * 4))),
        ab(align16(ak + size_t(C) * C * 4)),
        on_cores(align16(ab + size_t(C) * C * 4)),
        region(align16(on_cores + size_t(C / 16) * 4)),
        q(region),
        k(align16(q + size_t(C) * pitch(Kp) * 2)),
        a(align16(k + size_t(C) * pitch(Kp) * 2)),
        b(align16(a + size_t(C) * pitch(Kp) * 2)),
        left(align16(b + size_t(C) * pitch(Kp) * 2)),
        right(align16(left + size_t(32) * pitch(Kp) * 2)),
        ae(region),
        v(align16(ae + size_t(C) * pitch(Kp) * 2)),
        tb(align16(v + size_t(C) * pitch(Vp) * 2)),
        x(tb),  // [16 x C] f32 fits [C x pitch(C)] bf16 from C = 32 on (C = 16 has no block row to substitute)
        ta(align16(tb + size_t(C) * pitch(C) * 2)),
        bytes(std::max(align16(right + right_rows(C) * pitch(Kp) * 2), align16(ta + size_t(C) * pitch(C) * 2))) {}
  static constexpr size_t right_rows(int C) { return size_t(C); }
};

// Per (sequence, head, 32 state columns): W and U of two chunks (the next one's arrive while this one is worked
// on), the decayed k and b, h, [V; SA] of the slice, the chunk's row decays.
struct StateSmem {
  size_t w, u, kb, h, vsa, decay, bytes;
  constexpr StateSmem(int C, int Kp)
      : w(0),
        u(align16(w + 2 * size_t(C) * pitch(Kp) * 2)),
        kb(align16(u + 2 * size_t(C) * kStateCols * 4)),
        h(align16(kb + 2 * size_t(C) * pitch(Kp) * 2)),
        vsa(align16(h + size_t(Kp) * pitch(kStateCols) * 2)),
        decay(align16(vsa + 2 * size_t(C) * pitch(kStateCols) * 2)),
        bytes(align16(decay + size_t(Kp) * 4)) {}
};

struct OutputSmem {  // per (chunk, head): q e^{G}, h, [A_qk | A_qb], [V; SA]
  size_t q, h, p, vsa, bytes;
  constexpr OutputSmem(int C, int Kp, int Vp)
      : q(0),
        h(align16(q + size_t(C) * pitch(Kp) * 2)),
        p(align16(h + size_t(Kp) * pitch(Vp) * 2)),
        vsa(align16(p + size_t(C) * pitch(2 * C) * 2)),
        bytes(align16(vsa + 2 * size_t(C) * pitch(Vp) * 2)) {}
};

// Scratch sizes, in elements per (chunk, head).
constexpr int64_t rows_elems(int rows, int cols) { return int64_t(rows) * cols; }

struct ChunkLaunch : cuda_delta_chunk::ChunkPlan {
  Params params{};  // chunks, seq_chunks and the scratch pointers still null: see bind_scratch()
  // One-dimensional grids: intra and output (chunk, head); state (sequence, head, column slice).
  unsigned intra_grid = 0, state_grid = 0, output_grid = 0;
  size_t intra_smem = 0, state_smem = 0, output_smem = 0;
  // Byte offsets of the scratch in the allocation, after the chunk table, in Params' order.
  size_t wm_at = 0, u_at = 0, kb_at = 0, vsa_at = 0, qg_at = 0, pm_at = 0, decay_at = 0, h_at = 0;
};

// For a problem check_cuda_rwkv7_chunk accepts.
ChunkLaunch plan_rwkv7_chunk(const Rwkv7Problem& p, int64_t chunk_size);

// Points the plan's parameters into one device allocation of l.scratch_bytes at `base` (after the caller
// uploads the l.metadata_bytes of metadata_bytes_of(l) to its start).
void bind_scratch(ChunkLaunch& l, unsigned char* base);
std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l);

}  // namespace attnzoo::cuda_rwkv7_chunk
