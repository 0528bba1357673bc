// Chunked RWKV-7 prefill: fla's chunk_dplr_delta_rule on the CPU. One task = (sequence, group of heads); chunks of
// C tokens are processed in order, each head's state S [K, V] carried between them.
//
// Within a chunk with entry state S0 (matrices of chunk_matrices-inl.h; e^{G} applied per channel):
//   SA = A_ab SA + (a e^{G_{i-1}}) S0 + A_ak V         the low-rank reads sa_i = a_i^T S_{i-1}, coupled through the
//      = W S0 + U,  W = T (a e^{G_{i-1}}),  U = T (A_ak V),  T = (I - A_ab)^-1   (the WY-like representation)
//   O  = (q e^{G_i}) S0 + A_qk V + A_qb SA
//   S  = e^{G_last} S0 + (k e^{G_last - G_j})^T V + (b e^{G_last - G_j})^T SA
// Every factor is a decay towards the future (at most 1 for w <= 0), so nothing overflows at any decay strength.
// The products with S0 share one GEMM ([W; q e^{G}] S0 gives SA's and O's first terms), and the state update is one
// GEMM of [k e^{..} | b e^{..}]^T against [V; SA]. Lower-triangular factors skip their zero upper blocks.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/convert.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/rwkv7/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/rwkv7/chunk.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/linear/rwkv7/chunk_matrices-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

namespace {
// dst[0, n) = the n values at element `offset` as f32, times mul; dst[n, np) = 0.
void LoadRow(const void* base, DType t, int64_t offset, size_t n, size_t np, float mul, float* HWY_RESTRICT dst) {
  convert_to_f32(static_cast<const char*>(base) + offset * int64_t(dtype_size(t)), t, dst, n);
  std::fill(dst + n, dst + np, 0.f);
  if (mul != 1.f) DeltaScale(dst, np, mul);
}

// Requests rows [first_row, first_row + rows) of head h of every input, so they arrive while the current head
// computes (the hardware prefetcher does not follow rows H * K apart; measured ~3% of the time saved at K = 128).
void PrefetchRows(const Rwkv7Problem& p, int64_t first_row, int64_t rows, int64_t h) {
  const struct {
    const void* base;
    DType t;
    int64_t n;
  } inputs[] = {{p.r, p.r_dtype, p.K}, {p.w, p.w_dtype, p.K}, {p.k, p.k_dtype, p.K},
                {p.a, p.a_dtype, p.K}, {p.b, p.b_dtype, p.K}, {p.v, p.v_dtype, p.V}};
  for (const auto& in : inputs) {
    const size_t bytes = size_t(in.n) * dtype_size(in.t);
    for (int64_t i = 0; i < rows; ++i) {
      const char* row = static_cast<const char*>(in.base) + ((first_row + i) * p.H + h) * int64_t(bytes);
      for (size_t byte = 0; byte < bytes; byte += 64) hwy::Prefetch(row + byte);
    }
  }
}
}  // namespace

// Loads chunk rows [0, cp): rows past the c real tokens are zero tokens (w = 0, all else 0) that change nothing.
void Rwkv7LoadChunk(const Rwkv7Problem& p, Rwkv7ChunkScratch& sc, int64_t first_row, size_t c, size_t cp, int64_t h) {
  const hn::ScalableTag<float> d;
  const size_t K = size_t(p.K), V = size_t(p.V), Kp = DeltaPadded(p.K), Vp = DeltaPadded(p.V);
  for (size_t i = 0; i < cp; ++i) {
    float *qi = sc.q.data() + i * Kp, *ki = sc.k.data() + i * Kp, *ai = sc.a.data() + i * Kp;
    float *bi = sc.b.data() + i * Kp, *Gi = sc.G.data() + i * Kp, *Ei = sc.E.data() + i * Kp;
    float* vi = sc.VSO.data() + i * Vp;
    if (i >= c) {
      for (float* x : {qi, ki, ai, bi}) std::fill(x, x + Kp, 0.f);
      std::fill(vi, vi + Vp, 0.f);
      std::memcpy(Gi, Gi - Kp, Kp * sizeof(float));  // c >= 1, so row i - 1 exists
      std::fill(Ei, Ei + Kp, 1.f);
      continue;
    }
    const int64_t row = first_row + int64_t(i), kb = (row * p.H + h) * p.K, vb = (row * p.H + h) * p.V;
    LoadRow(p.r, p.r_dtype, kb, K, Kp, p.scale, qi);
    LoadRow(p.k, p.k_dtype, kb, K, Kp, 1.f, ki);
    LoadRow(p.a, p.a_dtype, kb, K, Kp, 1.f, ai);
    LoadRow(p.b, p.b_dtype, kb, K, Kp, 1.f, bi);
    LoadRow(p.v, p.v_dtype, vb, V, Vp, 1.f, vi);
    LoadRow(p.w, p.w_dtype, kb, K, Kp, 1.f, Ei);
    for (size_t x = 0; x < Kp; x += hn::Lanes(d)) {
      const auto w = hn::Load(d, Ei + x);
      hn::Store(i == 0 ? w : hn::Add(hn::Load(d, Gi - Kp + x), w), d, Gi + x);
      hn::Store(hn::Exp(d, w), d, Ei + x);
    }
  }
}

// One chunk: SA, O and the state update (file comment). Rows [2cp, 3cp) of VSO receive O.
void Rwkv7ChunkStep(Rwkv7ChunkScratch& sc, float* HWY_RESTRICT S, size_t cp, size_t K, size_t Kp, size_t Vp) {
  float* WQ = sc.WQ.data();
  float* V = sc.VSO.data();
  float* SA = V + cp * Vp;
  float* O = SA + cp * Vp;
  float* rows = sc.rows.data();
  const float* G_last = sc.G.data() + (cp - 1) * Kp;

  // a e^{G_{i-1}} (into rows), q e^{G_i} (into WQ's lower half), k and b decayed to the chunk end (transposed).
  for (size_t i = 0; i < cp; ++i) {
    Rwkv7MulExpDiff(rows + i * Kp, sc.a.data() + i * Kp, sc.G_before(i, Kp), nullptr, Kp);
    Rwkv7MulExpDiff(WQ + (cp + i) * Kp, sc.q.data() + i * Kp, sc.G.data() + i * Kp, nullptr, Kp);
  }
  DeltaLowerGemm(cp, Kp, sc.T.data(), cp, rows, Kp, WQ, Kp, false);  // W
  float* kb_t = sc.right_t.data();
  Rwkv7DecayedColumns(sc, cp, K, cp, G_last, kb_t);

  // U = T (A_ak V) into SA's rows; O = 0; then [SA; O] += [W; q e^{G}] S0.
  DeltaLowerGemm(cp, Vp, sc.Aak.data(), cp, V, Vp, sc.P.data(), Vp, false);
  DeltaLowerGemm(cp, Vp, sc.T.data(), cp, sc.P.data(), Vp, SA, Vp, false);
  std::fill(O, O + cp * Vp, 0.f);
  TileGemm(2 * cp, Vp, K, WQ, Kp, S, Vp, SA, Vp, true);
  DeltaLowerGemm(cp, Vp, sc.Aqk.data(), cp, V, Vp, O, Vp, true);
  DeltaLowerGemm(cp, Vp, sc.Aqb.data(), cp, SA, Vp, O, Vp, true);

  const hn::ScalableTag<float> d;
  for (size_t r = 0; r < K; ++r) DeltaScale(S + r * Vp, Vp, hn::GetLane(hn::Exp(d, hn::Set(d, G_last[r]))));
  TileGemm(K, Vp, 2 * cp, kb_t, 2 * cp, V, Vp, S, Vp, true);  // V and SA are adjacent rows of VSO
}

// Heads [h_begin, h_end) of one sequence, walking the chunks together: a token's rows for neighbouring heads are
// neighbours in memory, so they are read while their pages are fresh. One head alone reads rows H * K apart, each a
// TLB miss and a memory latency: copying the inputs then took ~30% of the time at K = 128, ~20% grouped, ~15% with
// the next head's rows prefetched.
void Rwkv7ChunkTask(const Rwkv7Problem& p, int64_t chunk_size, int64_t seq, int64_t h_begin, int64_t h_end) {
  static thread_local Rwkv7ChunkScratch sc;
  const size_t K = size_t(p.K), V = size_t(p.V), Kp = DeltaPadded(p.K), Vp = DeltaPadded(p.V);
  const size_t C = size_t(chunk_size), heads = size_t(h_end - h_begin);
  sc.resize(C, K, Kp, Vp);
  sc.S.resize(heads * K * Vp);
  auto state = [&](int64_t h) { return sc.S.data() + size_t(h - h_begin) * K * Vp; };
  auto state_base = [&](int64_t h) { return (seq * p.H + h) * p.K * p.V; };
  for (int64_t h = h_begin; h < h_end; ++h) {
    float* S = state(h);
    std::fill(S, S + K * Vp, 0.f);
    if (p.h0)
      for (size_t r = 0; r < K; ++r) std::memcpy(S + r * Vp, p.h0 + state_base(h) + int64_t(r * V), V * sizeof(float));
  }

  const int64_t len = p.seqs.length[size_t(seq)], begin = p.seqs.begin[size_t(seq)];
  for (int64_t t0 = 0; t0 < len; t0 += chunk_size) {
    const size_t c = size_t(std::min(chunk_size, len - t0)), cp = DeltaPadded(int64_t(c));
    for (int64_t h = h_begin; h < h_end; ++h) {
      Rwkv7LoadChunk(p, sc, begin + t0, c, cp, h);
      if (h + 1 < h_end) {
        PrefetchRows(p, begin + t0, int64_t(c), h + 1);
      } else if (t0 + chunk_size < len) {
        PrefetchRows(p, begin + t0 + chunk_size, std::min(chunk_size, len - t0 - chunk_size), h_begin);
      }
      Rwkv7ChunkMatrices(sc, cp, K, Kp);
      Rwkv7ChunkStep(sc, state(h), cp, K, Kp, Vp);
      const float* O = sc.VSO.data() + 2 * cp * Vp;
      for (size_t i = 0; i < c; ++i) {
        const int64_t vb = ((begin + t0 + int64_t(i)) * p.H + h) * p.V;
        convert_from_f32(O + i * Vp, static_cast<char*>(p.o) + vb * int64_t(dtype_size(p.o_dtype)), p.o_dtype, V);
      }
    }
  }
  // Written last, after the initial state was read: final_state may alias initial_state.
  if (p.ht)
    for (int64_t h = h_begin; h < h_end; ++h)
      for (size_t r = 0; r < K; ++r)
        std::memcpy(p.ht + state_base(h) + int64_t(r * V), state(h) + r * Vp, V * sizeof(float));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(Rwkv7ChunkTask);

void chunk_rwkv7(const Rwkv7Args& args, int64_t chunk_size) {
  require(chunk_size == 16 || chunk_size == 32 || chunk_size == 64 || chunk_size == 128, "chunk_size",
          "must be 16, 32, 64 or 128, got " + std::to_string(chunk_size));
  const Rwkv7Problem p = make_rwkv7_problem(args);
  if (!p.device.is_cpu()) return rwkv7_chunk_on_device(p, chunk_size);  // the one branch to a GPU
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  // Heads are grouped per task (see Rwkv7ChunkTask) while keeping about two tasks per thread for balance.
  const int64_t nseq = p.seqs.count(), threads = ThreadPool::global().num_threads();
  const int64_t groups = std::clamp<int64_t>((2 * threads + nseq - 1) / std::max<int64_t>(nseq, 1), 1, p.H);
  const int64_t per_group = (p.H + groups - 1) / groups, tasks_per_seq = (p.H + per_group - 1) / per_group;
  ThreadPool::global().parallel_for(nseq * tasks_per_seq, [&](int64_t task, int) {
    const int64_t seq = task / tasks_per_seq, h_begin = task % tasks_per_seq * per_group;
    HWY_DYNAMIC_DISPATCH(Rwkv7ChunkTask)(p, chunk_size, seq, h_begin, std::min(p.H, h_begin + per_group));
  });
}

}  // namespace attnzoo
#endif
