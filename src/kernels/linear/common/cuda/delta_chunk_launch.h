#pragma once
// The CUDA chunked delta rule's launch, decided on the host: the three kernels' parameters, grids, shared memory
// and scratch layout for a validated problem. Plain C++: delta_chunk.cu uploads the chunk table, allocates the
// scratch and launches; the kernel emulator (testing/cuda_emulation) runs the same plan through the same device
// code (delta_chunk_{intra,state,output}.cuh).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo::cuda_delta_chunk {

using cuda_linear::Elem;
using cuda_linear::elem_of;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxDim = 128;    // K and V: a lane stages at most four columns of a row (kMaxDim / 32)
constexpr int kStateCols = 32;  // state columns per CTA of the state pass: its h slice lives in MMA accumulators
constexpr int kPad = 8;         // bf16 elements of row padding in shared memory (see pitch())

struct Params {
  const void *q, *k, *v, *g, *beta;  // g null: the plain delta rule; beta null: 1
  void* o;
  Elem q_t, k_t, v_t, g_t, beta_t, o_t;
  const float* initial_state;  // [N, HV, K, V]; null: zeros
  float* final_state;          // [N, HV, K, V]; null: not written; may be initial_state
  // Pool states (ssm_state_indices): sequence n's state is row state_indices[n], state_stride floats apart;
  // a negative row is a pad whose chunks touch nothing. Null: row n of the dense states (stride HV K V).
  const int32_t* state_indices;
  int64_t state_stride;
  const ChunkDesc* chunks;     // [n_chunks]
  const int32_t* seq_chunks;   // [N + 1]: sequence n owns chunks [seq_chunks[n], seq_chunks[n + 1])
  // Scratch, per (chunk, value head) unless said otherwise; bf16 held as raw bits so this header needs no CUDA.
  uint16_t* w;     // [C, Kp] bf16: W = T diag(beta exp(G)) K, rows past the chunk zero
  uint16_t* kd;    // [C, Kp] bf16: Kd = K exp(G_last - G), the keys decayed to the chunk's end
  float* u;        // [C, Vp] f32:  U = T diag(beta) V
  uint16_t* vnew;  // [C, Vp] bf16: U - W h
  uint16_t* h;     // [Kp, Vp] bf16: the state before the chunk
  float* G;        // [B * T, HV] ([B * T, HV, K] for KDA): cumulative log decay within each chunk (gated only)
  int64_t n_chunks;
  int H, HV, K, V, Kp, Vp, group;  // Kp: K rounded up to 16; Vp: V rounded up to kStateCols
  float scale;
  bool l2norm;
  bool channel;  // KDA: g [B, T, HV, K], one decay per key channel
};

// Shared-memory layouts, in bytes, used by the kernels and by the host that sizes the launches. Rows of bf16
// tiles are padded by 16 bytes so the eight rows one ldmatrix phase reads start in different bank quads.
constexpr int pitch(int cols) { return cols + kPad; }
constexpr size_t align16(size_t x) { return (x + 15) / 16 * 16; }

// KDA adds G per channel ([C x Kp] f32) and two tiles of decayed rows for its sub-chunk products
// (delta_chunk_gram.cuh).
struct IntraSmem {  // per (chunk, value head): K, V, A, T (and a block row of partial sums), two scaled Ts
  size_t k, v, a, t, x, tb, tbg, G, beta, left, right, bytes;
  constexpr IntraSmem(int C, int Kp, int Vp, bool channel)
      : k(0),
        v(align16(k + size_t(C) * pitch(Kp) * 2)),
        a(align16(v + size_t(C) * pitch(Vp) * 2)),
        t(align16(a + size_t(C) * C * 4)),
        x(align16(t + size_t(C) * C * 4)),
        tb(align16(x + size_t(16) * C * 4)),
        tbg(align16(tb + size_t(C) * pitch(C) * 2)),
        G(align16(tbg + size_t(C) * pitch(C) * 2)),
        beta(align16(G + size_t(C) * (channel ? Kp : 1) * 4)),
        left(align16(beta + size_t(C) * 4)),
        right(align16(left + (channel ? size_t(16) * pitch(Kp) * 2 : 0))),
        bytes(align16(right + (channel ? size_t(C) * pitch(Kp) * 2 : 0))) {}
};

// Per (sequence, value head, 32 state columns): W and U of two chunks (the next one's arrive while this one is
// worked on), the decayed keys, h and v_new of a chunk, G_last (per channel for KDA).
struct StateSmem {
  size_t w, u, kd, h, vn, G, bytes;
  constexpr StateSmem(int C, int Kp)
      : w(0),
        u(align16(w + 2 * size_t(C) * pitch(Kp) * 2)),
        kd(align16(u + 2 * size_t(C) * kStateCols * 4)),
        h(align16(kd + size_t(C) * pitch(Kp) * 2)),
        vn(align16(h + size_t(Kp) * pitch(kStateCols) * 2)),
        G(align16(vn + size_t(C) * pitch(kStateCols) * 2)),
        bytes(align16(G + size_t(Kp) * 4)) {}
};

// Per (chunk, value head): Q, K, the masked scores, h and v_new. Without `keys` (the gated-linear output kernel
// given its key head's scores formed, gla_chunk_keys.cuh) K takes no room.
struct OutputSmem {
  size_t q, k, p, h, vn, G, left, right, bytes;
  constexpr OutputSmem(int C, int Kp, int Vp, bool channel, bool keys = true)
      : q(0),
        k(align16(q + size_t(C) * pitch(Kp) * 2)),
        p(align16(k + (keys ? size_t(C) * pitch(Kp) * 2 : 0))),
        h(align16(p + size_t(C) * pitch(C) * 2)),
        vn(align16(h + size_t(Kp) * pitch(Vp) * 2)),
        G(align16(vn + size_t(C) * pitch(Vp) * 2)),
        left(align16(G + size_t(C) * (channel ? Kp : 1) * 4)),
        right(align16(left + (channel ? size_t(16) * pitch(Kp) * 2 : 0))),
        bytes(align16(right + (channel ? size_t(C) * pitch(Kp) * 2 : 0))) {}
};

// Scratch sizes, in elements per (chunk, value head).
constexpr int64_t w_elems(int C, int Kp) { return int64_t(C) * Kp; }
constexpr int64_t u_elems(int C, int Vp) { return int64_t(C) * Vp; }
constexpr int64_t h_elems(int Kp, int Vp) { return int64_t(Kp) * Vp; }

struct ChunkLaunch : ChunkPlan {
  Params params{};  // chunks, seq_chunks and the scratch pointers still null: see bind_scratch()
  // One-dimensional grids: intra and output (chunk, value head); state (sequence, value head, column slice).
  unsigned intra_grid = 0, state_grid = 0, output_grid = 0;
  size_t intra_smem = 0, state_smem = 0, output_smem = 0;
  // Byte offsets of the scratch in the allocation, after the chunk table, in Params' order.
  size_t w_at = 0, kd_at = 0, u_at = 0, vnew_at = 0, h_at = 0, G_at = 0;
};

// The Params fields the delta rule's and the gated linear group's plans (gla_chunk_launch.cc) take alike from their
// problems, which name them alike: the states (dense rows HV K V floats apart unless pool rows are given), the
// chunk count, heads and widths (Kp, Vp padded as the tiles need) and the scale.
template <class ChunkParams, class Problem>
void set_shared_params(ChunkParams& params, const Problem& p, int64_t n_chunks) {
  params.initial_state = p.initial_state;
  params.final_state = p.final_state;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_indices ? p.state_stride : p.HV * p.K * p.V;
  params.n_chunks = n_chunks;
  params.H = int(p.H), params.HV = int(p.HV), params.K = int(p.K), params.V = int(p.V);
  params.Kp = int(round_up(p.K, 16)), params.Vp = int(round_up(p.V, kStateCols));
  params.group = int(p.group());
  params.scale = p.scale;
}

// For a problem check_cuda_delta_chunk accepts.
ChunkLaunch plan_delta_chunk(const DeltaProblem& p);

// Points the plan's parameters into one device allocation of l.scratch_bytes at `base` (after the caller
// uploads the l.metadata_bytes of metadata_bytes_of(l) to its start).
void bind_scratch(ChunkLaunch& l, unsigned char* base);
std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l);

}  // namespace attnzoo::cuda_delta_chunk
