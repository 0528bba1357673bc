#pragma once
// Next-token sampling on the GPU, one CTA per row of logits, with the CPU sampler's semantics step for step
// (engine/sampler.cc): penalties, the NaN / +inf / all -inf refusals, greedy as the first index of the maximum,
// temperature, then top-k, top-p and min-p, then one draw. Greedy rows give the CPU's token exactly; a seeded
// draw gives it too unless the draw lands within rounding of the boundary between two tokens, since the two
// sides sum the same weights in different orders.
//
// The CPU sorts the filtered candidates (logit descending, ties by id) and walks them; nothing is sorted here.
// Every set the CPU keeps (the k best, the nucleus, min-p's) and the token a draw lands on is a prefix of that
// order, and a prefix is named by where it ends: a logit and, among the tokens tied at that logit, an id. Each
// end is found by a binary search over the logits' order-preserving 32-bit keys, every step one block-wide sum
// over the row's candidates. Unfiltered and min-p-only rows draw in id order, as the CPU does: per-thread
// contiguous chunks, their sums scanned in order, and the thread whose chunk holds the draw walks it.
// Reductions use fixed trees, so a row's result does not depend on the other rows or on timing.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "engine/cuda/sample_params.h"

namespace attnzoo::cuda_sample {

// Products and sums rounded one at a time, as the CPU computes them: nvcc would fuse a * b + c.
#if defined(ATTNZOO_CUDA_EMULATION)
inline float mul_rn(float a, float b) { return a * b; }
inline float add_rn(float a, float b) { return a + b; }
#else
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
#endif

// Larger floats give larger keys; -0 takes +0's key, since the CPU's order holds them equal.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t b = __float_as_uint(x == 0.f ? 0.f : x);
  return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

struct Sum {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Every thread gets op over the block's values. A butterfly within each warp (a + b == b + a, so all lanes agree),
// then the warps' results combined in warp order by every thread: the same tree on every run.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* shared, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  T r = shared[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, shared[w]);
  __syncthreads();  // `shared` is free again for the next reduction
  return r;
}

// The end of a prefix of the CPU's order: every candidate with a larger key, and those tied at `key` up to `id`.
struct PrefixEnd {
  uint32_t key;
  int32_t id;
};
__device__ __forceinline__ bool in_prefix(const Candidate& c, PrefixEnd e) {
  return c.key > e.key || (c.key == e.key && c.id <= e.id);
}

struct RowScratch {
  double d[kThreads];
  double dw[kWarps];
  float fw[kWarps];
  int32_t iw[kWarps];
  uint32_t uw[kWarps];
  int32_t counts[kThreads];
};

// The candidates' weights summed over the prefix `within`, restricted to keys >= `at_least`.
__device__ __forceinline__ double prefix_mass(const Candidate* c, int32_t n, PrefixEnd within, uint32_t at_least,
                                              RowScratch& s) {
  double m = 0.0;
  for (int32_t i = threadIdx.x; i < n; i += kThreads)
    if (in_prefix(c[i], within) && c[i].key >= at_least) m += c[i].weight;
  return block_reduce(m, s.dw, Sum{});
}

// The first candidate of prefix `within`, in the CPU's order, whose running sum (itself included) reaches
// `target` (strict: exceeds it); the prefix's whole mass must. The CPU adds one weight at a time in that order:
// the key is the largest whose candidates at or above it reach the target, then the tied ones are added one by
// one (they weigh the same) and the id is the count-th smallest among them.
__device__ PrefixEnd find_crossing(const Candidate* c, int32_t n, PrefixEnd within, double target, bool strict,
                                   RowScratch& s) {
  auto reaches = [&](double sum) { return strict ? sum > target : sum >= target; };
  uint32_t key = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t trial = key | (1u << bit);
    if (reaches(prefix_mass(c, n, within, trial, s))) key = trial;
  }
  double above = 0.0, tie_weight = 0.0;
  int32_t ties = 0;
  for (int32_t i = threadIdx.x; i < n; i += kThreads) {
    if (!in_prefix(c[i], within)) continue;
    if (c[i].key > key) above += c[i].weight;
    else if (c[i].key == key) tie_weight = c[i].weight, ++ties;
  }
  above = block_reduce(above, s.dw, Sum{});
  tie_weight = block_reduce(tie_weight, s.dw, Max{});
  ties = block_reduce(ties, s.iw, Sum{});
  int32_t count = 1;
  for (double run = above + tie_weight; count < ties && !reaches(run); ++count) run += tie_weight;
  // The count-th tied candidate by id: the candidates are in id order, so each thread counts the ties in its
  // contiguous chunk and the one whose chunk holds the count-th walks it.
  const int32_t chunk = (n + kThreads - 1) / kThreads;
  const int32_t lo = min(n, int32_t(threadIdx.x) * chunk), hi = min(n, lo + chunk);
  int32_t mine = 0;
  for (int32_t i = lo; i < hi; ++i) mine += in_prefix(c[i], within) && c[i].key == key;
  s.counts[threadIdx.x] = mine;
  __syncthreads();
  int32_t before = 0;
  for (int t = 0; t < int(threadIdx.x); ++t) before += s.counts[t];
  int32_t id = INT32_MAX;
  if (before < count && count <= before + mine) {
    int32_t seen = before;
    for (int32_t i = lo; i < hi && id == INT32_MAX; ++i)
      if (in_prefix(c[i], within) && c[i].key == key && ++seen == count) id = c[i].id;
  }
  id = block_reduce(id, s.iw, Min{});
  return {key, id};
}

// The last candidate of prefix `within` with a positive weight, in the CPU's order: where its walk ends when
// rounding leaves the draw at or past the total.
__device__ PrefixEnd last_positive(const Candidate* c, int32_t n, PrefixEnd within, RowScratch& s) {
  uint32_t key = UINT32_MAX;
  for (int32_t i = threadIdx.x; i < n; i += kThreads)
    if (in_prefix(c[i], within) && c[i].weight > 0.0) key = min(key, c[i].key);
  key = block_reduce(key, s.uw, Min{});
  int32_t id = -1;
  for (int32_t i = threadIdx.x; i < n; i += kThreads)
    if (in_prefix(c[i], within) && c[i].key == key) id = max(id, c[i].id);
  return {key, block_reduce(id, s.iw, Max{})};
}

// Unfiltered and min-p-only rows, in id order as the CPU walks them: the tokens at or above `floor`, weighted
// exp(x - max) in float like the CPU's vectorised pass (`float_weights`) or in double like its candidate walk.
__device__ void draw_in_id_order(const float* x, int32_t vocab, float max_logit, float floor, bool float_weights,
                                 double u, int32_t* out, RowScratch& s) {
  auto weight = [&](float v) {
    return float_weights ? double(expf(v - max_logit)) : exp(double(v) - double(max_logit));
  };
  const int32_t chunk = (vocab + kThreads - 1) / kThreads;
  const int32_t lo = min(vocab, int32_t(threadIdx.x) * chunk), hi = min(vocab, lo + chunk);
  double mine = 0.0;
  for (int32_t i = lo; i < hi; ++i)
    if (x[i] >= floor) mine += weight(x[i]);
  s.d[threadIdx.x] = mine;
  __syncthreads();
  // The chunks' sums in order: every thread runs the same sequence, so `before` and `total` agree everywhere.
  double run = 0.0, before = 0.0;
  int last_nonzero = 0;
  for (int t = 0; t < kThreads; ++t) {
    if (t == int(threadIdx.x)) before = run;
    if (s.d[t] > 0.0) last_nonzero = t;
    run += s.d[t];
  }
  const double total = run, target = u * total;
  const bool walks = target < total ? (before <= target && target < before + mine) : int(threadIdx.x) == last_nonzero;
  if (!walks) return;
  double cum = before;
  int32_t last = -1;
  for (int32_t i = lo; i < hi; ++i) {
    if (!(x[i] >= floor)) continue;
    const double w = weight(x[i]);
    if (w <= 0.0) continue;
    cum += w;
    last = i;
    if (target < cum) break;
  }
  *out = last;  // the crossing, or (rounding) the chunk's last token with weight
}

__device__ void sample_row(const SampleParams& p) {
  __shared__ RowScratch s;
  const int32_t row = int32_t(blockIdx.x), vocab = p.vocab;
  const RowSettings r = p.rows[row];
  const float* in = p.logits + int64_t(r.logits_row) * p.row_stride;
  float* x = p.work + int64_t(row) * vocab;
  int32_t* out = p.out + row;

  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) x[i] = in[i];
  __syncthreads();
  for (int32_t e = r.penalty_begin + int32_t(threadIdx.x); e < r.penalty_end; e += kThreads) {
    const PenaltyEntry pe = p.penalties[e];
    float l = x[pe.id];
    if (r.repetition_penalty != 1.f) l = l > 0.f ? l / r.repetition_penalty : mul_rn(l, r.repetition_penalty);
    // count is the generated tokens' only: a prompt token takes the repetition penalty alone.
    if (pe.count > 0) l = l - add_rn(r.presence_penalty, mul_rn(r.frequency_penalty, float(pe.count)));
    x[pe.id] = l;
  }
  __syncthreads();

  float m = -INFINITY;
  int32_t nan = 0;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    nan |= isnan(x[i]);
    m = fmaxf(m, x[i]);
  }
  m = block_reduce(m, s.fw, Max{});
  nan = block_reduce(nan, s.iw, Max{});
  const int32_t status = nan ? kRowNan : m == INFINITY ? kRowPosInf : m == -INFINITY ? kRowAllNegInf : kRowOk;
  if (status != kRowOk) {
    if (threadIdx.x == 0) *out = -1, p.status[row] = status;
    return;
  }
  if (r.temperature == 0.f) {
    int32_t first = INT32_MAX;
    for (int32_t i = threadIdx.x; i < vocab && first == INT32_MAX; i += kThreads)
      if (x[i] == m) first = i;
    first = block_reduce(first, s.iw, Min{});
    if (threadIdx.x == 0) *out = first, p.status[row] = kRowOk;
    return;
  }
  if (r.temperature != 1.f) {
    const float inv = 1.f / r.temperature;
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) x[i] = mul_rn(x[i], inv);
    m = mul_rn(m, inv);  // exact: rounding is monotone, so the scaled row's max is the scaled max
    __syncthreads();
    if (!isfinite(m)) {
      if (threadIdx.x == 0) *out = -1, p.status[row] = kRowOverflow;
      return;
    }
  }
  if (threadIdx.x == 0) p.status[row] = kRowOk;

  const bool top_k = r.top_k > 0, top_p = r.top_p < 1.f, min_p = r.log_min_p > -INFINITY;
  if (!top_k && !top_p) {
    if (min_p) draw_in_id_order(x, vocab, m, m + r.log_min_p, false, r.u, out, s);
    else draw_in_id_order(x, vocab, m, -INFINITY, true, r.u, out, s);
    return;
  }

  // The candidates: the k best (every token tied with the k-th kept), or for the nucleus alone the tokens
  // within a margin of the max wide enough to hold its mass, widening as the CPU does.
  auto full_mass = [&] {  // the CPU's normaliser without top-k: its float exp pass over the whole row
    double sum = 0.0;
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) sum += double(expf(x[i] - m));
    return block_reduce(sum, s.dw, Sum{});
  };
  uint32_t floor_key = 0;
  double normaliser = 0.0;
  if (top_k) {
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t trial = floor_key | (1u << bit);
      int32_t count = 0;
      for (int32_t i = threadIdx.x; i < vocab; i += kThreads) count += order_key(x[i]) >= trial;
      if (block_reduce(count, s.iw, Sum{}) >= r.top_k) floor_key = trial;
    }
  } else {
    normaliser = full_mass();
    const double target = double(r.top_p) * normaliser;
    const float margins[] = {4.f, 8.f, 12.f, 16.f, 24.f, 32.f, INFINITY};
    for (const float margin : margins) {
      const float floor = margin == INFINITY ? -INFINITY : m - margin;
      floor_key = order_key(floor);
      if (margin == INFINITY) break;
      double mass = 0.0;
      for (int32_t i = threadIdx.x; i < vocab; i += kThreads)
        if (x[i] >= floor) mass += exp(double(x[i]) - double(m));
      if (!(block_reduce(mass, s.dw, Sum{}) < target * (1.0 - 1e-6))) break;
    }
  }

  // Compacted in id order: per-thread chunk counts scanned in thread order.
  Candidate* c = p.candidates + int64_t(row) * vocab;
  const int32_t chunk = (vocab + kThreads - 1) / kThreads;
  const int32_t lo = min(vocab, int32_t(threadIdx.x) * chunk), hi = min(vocab, lo + chunk);
  int32_t mine = 0;
  for (int32_t i = lo; i < hi; ++i) mine += order_key(x[i]) >= floor_key;
  s.counts[threadIdx.x] = mine;
  __syncthreads();
  int32_t at = 0, n = 0;
  for (int t = 0; t < kThreads; ++t) {
    if (t == int(threadIdx.x)) at = n;
    n += s.counts[t];
  }
  for (int32_t i = lo; i < hi; ++i)
    if (order_key(x[i]) >= floor_key) c[at++] = {exp(double(x[i]) - double(m)), order_key(x[i]), i};
  __syncthreads();  // the block's global writes are visible to all of it after the barrier

  PrefixEnd keep{floor_key, INT32_MAX};
  if (top_p) {
    if (top_k) normaliser = prefix_mass(c, n, keep, 0, s);  // after top-k its own mass normalises
    const double target = double(r.top_p) * normaliser;
    // Short of the target (the CPU's widening tolerance), the CPU keeps every candidate.
    if (prefix_mass(c, n, keep, 0, s) >= target) keep = find_crossing(c, n, keep, target, false, s);
  }
  if (min_p) {
    // The max survives every filter, so min-p's bound is a fixed logit: the shorter of the two prefixes.
    const uint32_t k = order_key(m + r.log_min_p);
    if (k > keep.key) keep = {k, INT32_MAX};
  }
  const double total = prefix_mass(c, n, keep, 0, s), target = r.u * total;
  const PrefixEnd token = target < total ? find_crossing(c, n, keep, target, true, s) : last_positive(c, n, keep, s);
  if (threadIdx.x == 0) *out = token.id;
}

}  // namespace attnzoo::cuda_sample
