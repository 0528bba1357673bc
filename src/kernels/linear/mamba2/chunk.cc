// Chunked SSD prefill. Inside a chunk of Q tokens, with b_i the running sum of g = A dt' from the chunk start:
//   y_i  = exp(b_i) C_i S0                                   (what the carried state contributes)
//        + sum_{j <= i} (C_i . B_j) exp(b_i - b_j) dt'_j x_j   (the quadratic, attention-like part)
//   S_Q  = exp(b_Q) S0 + sum_j exp(b_Q - b_j) B_j (dt'_j x_j)^T
// with the state S kept as [N, P] (state size x head dim). Every term is a tile product. One task = (sequence,
// group, block of heads in the group): C B^T depends only on the group, so it is computed once per chunk and
// shared by the heads of the block; choose_head_blocks sizes the blocks against that recomputation and the
// waves of tasks the pool runs.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/mamba2/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/mamba2/chunk.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/common/tile_gemm-inl.h"
#include "kernels/linear/common/ssm_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
constexpr size_t kCausalRows = 2 * kTileRows;  // row block of the triangular intra-chunk product
constexpr size_t kTransposeRows = 16;

struct Scratch {
  AlignedBuffer<float> c, b, bt, cb, states, cum, tail_decay, xs, x, cs, m, y, bw, z;
};

const char* at(const void* base, DType t, int64_t index) {
  return static_cast<const char*>(base) + index * int64_t(dtype_size(t));
}

// A token's x, z and y for the task's heads are one span, but tokens lie H * P elements apart, so a chunk
// crosses a page every token or two and the hardware prefetcher stops following it. The next chunk's spans
// (and its B / C rows) are requested into L2 while this chunk computes.
void PrefetchSpan(const void* base, DType t, int64_t first, size_t elems, bool write) {
  if (!base) return;
  const char* p = at(base, t, first);
  const size_t bytes = elems * dtype_size(t);
  for (size_t off = 0; off < bytes; off += 64) {
    if (write) __builtin_prefetch(p + off, 1, 2);
    else __builtin_prefetch(p + off, 0, 2);
  }
}

// A row as f32: f32 inputs are read where they are (a copy would only add a pass over x, B and C), other
// dtypes are widened into `scratch`.
const float* RowF32(const void* base, DType t, int64_t index, float* scratch, size_t n) {
  if (t == DType::f32) return static_cast<const float*>(base) + index;
  convert_to_f32(at(base, t, index), t, scratch, n);
  return scratch;
}

void PrefetchChunk(const Mamba2Problem& p, int64_t row0, int64_t rows, int64_t g, int64_t head0, int64_t head1) {
  const size_t span = size_t((head1 - head0) * p.P);
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const int64_t xi = (r * p.H + head0) * p.P, bi = (r * p.G + g) * p.N;
    PrefetchSpan(p.x, p.x_dtype, xi, span, false);
    PrefetchSpan(p.z, p.z_dtype, xi, span, false);
    PrefetchSpan(p.y, p.y_dtype, xi, span, true);
    PrefetchSpan(p.Bm, p.b_dtype, bi, size_t(p.N), false);
    PrefetchSpan(p.Cm, p.c_dtype, bi, size_t(p.N), false);
  }
}
}  // namespace

// Head blocks: task = ((seq * G + group) * blocks + block).
void Mamba2ChunkTask(const Mamba2Problem& p, int64_t blocks, int64_t task) {
  static thread_local Scratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t block = task % blocks, sg = task / blocks, g = sg % p.G, s = sg / p.G;
  const int64_t hpg = p.heads_per_group(), per_block = (hpg + blocks - 1) / blocks;
  const int64_t head0 = g * hpg + block * per_block, head1 = std::min(g * hpg + hpg, head0 + per_block);
  if (head0 >= head1) return;
  const size_t Q = size_t(p.chunk_size), N = size_t(p.N), P = size_t(p.P);
  const size_t Pp = (P + 15) / 16 * 16;  // padded so tile products see whole vectors on every target
  const size_t nheads = size_t(head1 - head0);
  sc.c.resize(Q * N), sc.b.resize(Q * N), sc.bt.resize(N * Q), sc.cb.resize(Q * Q), sc.states.resize(nheads * N * Pp);
  sc.cum.resize(Q), sc.tail_decay.resize(Q), sc.xs.resize(Q * Pp), sc.x.resize(Q * P), sc.cs.resize(Q * N), sc.m.resize(Q * Q);
  sc.y.resize(Q * Pp), sc.bw.resize(N * Q), sc.z.resize(P);

  // States enter as [P, N] and are kept as [N, Pp] (zero padding columns stay zero: x is zero-padded too).
  for (size_t hh = 0; hh < nheads; ++hh) {
    float* S = sc.states.data() + hh * N * Pp;
    std::fill(S, S + N * Pp, 0.f);
    if (!p.h0) continue;
    const float* src = p.h0 + ((s * p.H + head0 + int64_t(hh)) * p.P) * p.N;
    for (size_t i = 0; i < P; ++i)
      for (size_t n = 0; n < N; ++n) S[n * Pp + i] = src[i * N + n];
  }
  std::fill(sc.xs.data(), sc.xs.data() + Q * Pp, 0.f);

  const int64_t len = p.seqs.length[size_t(s)];
  for (int64_t t0 = 0; t0 < len; t0 += int64_t(Q)) {
    const size_t rows = size_t(std::min<int64_t>(int64_t(Q), len - t0));
    const int64_t row0 = p.seqs.begin[size_t(s)] + t0;
    if (t0 + int64_t(Q) < len) PrefetchChunk(p, row0 + int64_t(Q), std::min<int64_t>(int64_t(Q), len - t0 - int64_t(Q)), g, head0, head1);
    // C rows (in place for f32: row i at c + i * ldc) and B^T for the group; B^T columns past the end are zero.
    const bool c_direct = p.c_dtype == DType::f32;
    const size_t ldc = c_direct ? size_t(p.G * p.N) : N;
    const float* c = c_direct ? static_cast<const float*>(p.Cm) + (row0 * p.G + g) * p.N : sc.c.data();
    // B is transposed kTransposeRows rows at a time, so each B^T row is written a whole cache line at once.
    for (size_t i0 = 0; i0 < rows; i0 += kTransposeRows) {
      const size_t i1 = std::min(rows, i0 + kTransposeRows);
      const float* brows[kTransposeRows];
      for (size_t i = i0; i < i1; ++i) {
        const int64_t bi = ((row0 + int64_t(i)) * p.G + g) * p.N;
        if (!c_direct) convert_to_f32(at(p.Cm, p.c_dtype, bi), p.c_dtype, sc.c.data() + i * N, N);
        brows[i - i0] = RowF32(p.Bm, p.b_dtype, bi, sc.b.data() + i * N, N);
      }
      for (size_t n = 0; n < N; ++n)
        for (size_t i = i0; i < i1; ++i) sc.bt[n * Q + i] = brows[i - i0][n];
    }
    for (size_t n = 0; n < N; ++n) std::fill(sc.bt.data() + n * Q + rows, sc.bt.data() + (n + 1) * Q, 0.f);
    TileGemm(rows, Q, N, c, ldc, sc.bt.data(), Q, sc.cb.data(), Q, /*accumulate=*/false);

    for (int64_t head = head0; head < head1; ++head) {
      float* S = sc.states.data() + size_t(head - head0) * N * Pp;
      const float A = p.A[size_t(head)];
      float run = 0.f;
      for (size_t i = 0; i < Q; ++i) {
        if (i < rows) run += A * p.dt[size_t((row0 + int64_t(i)) * p.H + head)];
        sc.cum[i] = run;  // padding rows repeat the last sum: their decay factors stay finite
      }
      for (size_t i = 0; i < rows; ++i) {
        const int64_t xi = ((row0 + int64_t(i)) * p.H + head) * p.P;
        const float* xrow = RowF32(p.x, p.x_dtype, xi, sc.x.data() + i * P, P);
        const float dt = p.dt[size_t((row0 + int64_t(i)) * p.H + head)];
        for (size_t k = 0; k < P; ++k) sc.xs[i * Pp + k] = dt * xrow[k];
      }
      for (size_t i = rows; i < Q; ++i) std::fill(sc.xs.data() + i * Pp, sc.xs.data() + (i + 1) * Pp, 0.f);

      // Decay-masked scores M = (C B^T) * exp(b_i - b_j) for j <= i, and C scaled by exp(b_i).
      for (size_t i = 0; i < rows; ++i) {
        const auto bi = hn::Set(d, sc.cum[i]);
        float* mrow = sc.m.data() + i * Q;
        const float* cbrow = sc.cb.data() + i * Q;
        const size_t visible = i + 1;
        for (size_t j = 0; j < visible; j += L)  // Q is a multiple of L; lanes past i are zeroed below
          hn::Store(hn::Mul(hn::Load(d, cbrow + j), hn::Exp(d, hn::Sub(bi, hn::Load(d, sc.cum.data() + j)))), d,
                    mrow + j);
        std::fill(mrow + visible, mrow + Q, 0.f);
        const float e = std::exp(sc.cum[i]);
        const float* crow = c + i * ldc;
        float* csrow = sc.cs.data() + i * N;
        for (size_t n = 0; n < N; ++n) csrow[n] = e * crow[n];
      }
      // An f32 y with whole-vector rows is written in place (row i at y + i * ldy).
      const bool y_direct = p.y_dtype == DType::f32 && P == Pp;
      const size_t ldy = y_direct ? size_t(p.H * p.P) : Pp;
      float* y = y_direct ? static_cast<float*>(p.y) + (row0 * p.H + head) * p.P : sc.y.data();
      TileGemm(rows, Pp, N, sc.cs.data(), N, S, Pp, y, ldy, /*accumulate=*/false);
      // M is lower triangular: a block of rows needs the columns up to its last row only.
      for (size_t r0 = 0; r0 < rows; r0 += kCausalRows) {
        const size_t r1 = std::min(rows, r0 + kCausalRows);
        TileGemm(r1 - r0, Pp, r1, sc.m.data() + r0 * Q, Q, sc.xs.data(), Pp, y + r0 * ldy, ldy, /*accumulate=*/true);
      }

      const float* D = p.D.empty() ? nullptr : p.D.data() + head * p.P;
      for (size_t i = 0; i < rows; ++i) {
        if (!D && !p.z && y_direct) break;
        const int64_t xi = ((row0 + int64_t(i)) * p.H + head) * p.P;
        float* yrow = y + i * ldy;
        const float* z = p.z ? RowF32(p.z, p.z_dtype, xi, sc.z.data(), P) : nullptr;
        const float* xrow = D ? RowF32(p.x, p.x_dtype, xi, sc.x.data() + i * P, P) : nullptr;
        SkipAndGate(yrow, P, D, xrow, z);
        if (!y_direct)
          convert_from_f32(yrow, static_cast<char*>(p.y) + xi * int64_t(dtype_size(p.y_dtype)), p.y_dtype, P);
      }

      // Carry the state to the chunk end: S = exp(b_last) S + (B * exp(b_last - b_j))^T (dt' x).
      const float last = sc.cum[rows - 1];
      const float e_last = std::exp(last);
      for (size_t k = 0; k < N * Pp; k += L) hn::Store(hn::Mul(hn::Set(d, e_last), hn::Load(d, S + k)), d, S + k);
      for (size_t j = 0; j < rows; ++j) sc.tail_decay[j] = std::exp(last - sc.cum[j]);
      for (size_t n = 0; n < N; ++n)
        for (size_t j = 0; j < rows; ++j) sc.bw[n * Q + j] = sc.bt[n * Q + j] * sc.tail_decay[j];
      TileGemm(N, Pp, rows, sc.bw.data(), Q, sc.xs.data(), Pp, S, Pp, /*accumulate=*/true);
    }
  }

  if (!p.ht) return;
  for (size_t hh = 0; hh < nheads; ++hh) {
    const float* S = sc.states.data() + hh * N * Pp;
    float* dst = p.ht + ((s * p.H + head0 + int64_t(hh)) * p.P) * p.N;
    for (size_t i = 0; i < P; ++i)
      for (size_t n = 0; n < N; ++n) dst[i * N + n] = S[n * Pp + i];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(Mamba2ChunkTask);

namespace {
// How many blocks to cut each group's heads into. Every block recomputes C B^T for its chunks (Q N multiply-adds
// per token), every head costs 2 N P + Q P / 2 per token, and tasks run in waves of `threads`: the estimate is
// waves x (heads per block x head cost + C B^T). Among the estimates within 3% of the best, the most blocks win
// (more tasks absorb a thread that another process slows down).
int64_t choose_head_blocks(const Mamba2Problem& p, int64_t threads) {
  const int64_t hpg = p.heads_per_group(), base = std::max<int64_t>(p.seqs.count() * p.G, 1);
  const double head = 2.0 * double(p.N * p.P) + 0.5 * double(p.chunk_size * p.P);
  const double cb = double(p.chunk_size * p.N);
  const auto cost = [&](int64_t blocks) {
    const int64_t per_block = (hpg + blocks - 1) / blocks, waves = (base * blocks + threads - 1) / threads;
    return double(waves) * (double(per_block) * head + cb);
  };
  double best = cost(1);
  for (int64_t blocks = 2; blocks <= hpg; ++blocks) best = std::min(best, cost(blocks));
  int64_t chosen = 1;
  for (int64_t blocks = 1; blocks <= hpg; ++blocks)
    if (cost(blocks) <= 1.03 * best) chosen = blocks;
  return chosen;
}
}  // namespace

void mamba2_chunk_scan(const Mamba2Args& args) {
  const Mamba2Problem p = make_mamba2_problem(args);
  if (!p.device.is_cpu()) return mamba2_chunk_on_device(p);
  active_target();
  const int64_t base = p.seqs.count() * p.G;
  const int64_t blocks = choose_head_blocks(p, ThreadPool::global().num_threads());
  ThreadPool::global().parallel_for(base * blocks, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(Mamba2ChunkTask)(p, blocks, task);
  });
}

}  // namespace attnzoo
#endif
