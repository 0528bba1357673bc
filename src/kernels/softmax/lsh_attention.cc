// LSH attention's fast path and its hashing step, per SIMD target. One task per (batch, head): the head's qk
// and v rows are converted to f32 once, the rounds' buckets counting-sorted (stable, so ties keep position
// order: the (bucket, position) order of the definition), and each chunk runs as one tile: Q [rows x D] times
// K^T [D x up to 2 chunks] and P V through the tile GEMM, with a whole-row softmax (a row's keys fit in one
// tile, so no online rescaling is needed within a round). Rounds merge into a per-position accumulator by their
// log-sum-exp as each chunk finishes: every position is a query exactly once per round, so the chunks of one
// round write disjoint rows. Cost per head: O(T * D) for the copies and the sort, O(num_hashes * T *
// chunk_length * (D + Dv)) for the tiles: linear in T at a fixed chunk length.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/softmax/lsh.h"
#include "kernels/softmax/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/lsh_attention.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/common/fast_exp2-inl.h"
#include "kernels/common/tile_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kPad = 16;  // tile widths round up to this: a whole vector on every target
size_t Padded(size_t n) { return (n + kPad - 1) / kPad * kPad; }

struct LshScratch {
  AlignedBuffer<float> x, vals, q, kt, v, s, o, acc;
  std::vector<float> inv_norm, best_lse, weight, lse, row_sum;
  std::vector<int32_t> sorted, keypos, count;
};

// Rows [0, T) of one head of `src` ([B, T, H, dim]) as f32, `ld` floats apart (zero padding past dim).
void HeadRowsToF32(const TensorView& src, int64_t b, int64_t h, int64_t T, size_t dim, size_t ld, float* dst) {
  const size_t elem = dtype_size(src.dtype);
  for (int64_t t = 0; t < T; ++t) {
    const char* row = static_cast<const char*>(src.data) + LshProblem::row(src, b, t, h) * int64_t(elem);
    convert_to_f32(row, src.dtype, dst + size_t(t) * ld, dim);
    std::fill(dst + size_t(t) * ld + dim, dst + size_t(t + 1) * ld, 0.f);
  }
}

// Slot -> position for every round, rounds end to end: counting sort of each round by bucket, stable in the
// position. Without hashing, one round in position order.
void SortByBucket(const LshProblem& p, int64_t b, int64_t h, LshScratch& sc) {
  const int64_t T = p.T;
  if (!p.hashed()) {
    sc.sorted.resize(size_t(T));
    for (int64_t t = 0; t < T; ++t) sc.sorted[size_t(t)] = int32_t(t);
    return;
  }
  sc.sorted.resize(size_t(p.num_hashes * T));
  sc.count.resize(size_t(p.num_buckets + 1));
  for (int64_t r = 0; r < p.num_hashes; ++r) {
    const int32_t* bk = p.head_buckets(b, h) + r * T;
    std::fill(sc.count.begin(), sc.count.end(), 0);
    for (int64_t t = 0; t < T; ++t) ++sc.count[size_t(bk[t]) + 1];
    for (int64_t k = 0; k < p.num_buckets; ++k) sc.count[size_t(k + 1)] += sc.count[size_t(k)];
    int32_t* out = sc.sorted.data() + r * T;
    for (int64_t t = 0; t < T; ++t) out[sc.count[size_t(bk[t])]++] = int32_t(t);
  }
}

// Scores of one query row against the tile's keys: masks, then exp(s - max) in place. Returns the row's
// log-sum-exp; *sum gets the sum of the exponentials.
float SoftmaxLshRow(float* HWY_RESTRICT s, size_t ncols, size_t cols, const int32_t* keypos, int32_t qpos,
                    bool causal, float* sum) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  for (size_t j = 0; j < cols; ++j) {
    if (causal && keypos[j] > qpos) s[j] = -INFINITY;
    else if (keypos[j] == qpos) s[j] = float(kLshSelfScore);
  }
  for (size_t j = cols; j < ncols; ++j) s[j] = -INFINITY;
  auto vmax = hn::Set(d, -INFINITY);
  for (size_t j = 0; j < ncols; j += L) vmax = hn::Max(vmax, hn::Load(d, s + j));
  const float m = hn::GetLane(hn::MaxOfLanes(d, vmax));  // finite: the query's own position is in its chunk
  *sum = ExpMinusMaxInPlace(d, s, ncols, m);
  return m + std::log(*sum);
}

template <int kWrite>
void PrefetchRow(const float* row, size_t n) {
  for (size_t i = 0; i < n; i += 16) __builtin_prefetch(row + i, kWrite, 3);
}

void RunLshHead(const LshProblem& p, int64_t task) {
  static thread_local LshScratch sc;
  const int64_t b = task / p.H, h = task % p.H, T = p.T;
  const size_t D = size_t(p.D), Dv = size_t(p.Dv), Dvp = Padded(Dv);
  const int64_t C = p.opts.chunk_length;
  const int64_t N = p.hashed() ? p.num_hashes * T : T;  // slots
  const int64_t nchunks = (N + C - 1) / C;
  const size_t Bc = Padded(size_t(std::min<int64_t>(nchunks > 1 ? 2 * C : C, N)));

  sc.x.resize(size_t(T) * D);
  sc.vals.resize(size_t(T) * Dvp);
  HeadRowsToF32(p.qk, b, h, T, D, D, sc.x.data());
  HeadRowsToF32(p.v, b, h, T, Dv, Dvp, sc.vals.data());
  sc.inv_norm.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) {  // keys: qk / sqrt(mean(qk^2) + eps) / sqrt(D)
    double ss = 0;
    for (size_t d = 0; d < D; ++d) ss += double(sc.x[size_t(t) * D + d]) * sc.x[size_t(t) * D + d];
    sc.inv_norm[size_t(t)] = float(1.0 / std::sqrt(ss / double(D) + kLshNormEpsilon) / std::sqrt(double(D)));
  }
  SortByBucket(p, b, h, sc);

  sc.acc.resize(size_t(T) * Dvp);
  std::fill(sc.acc.data(), sc.acc.data() + size_t(T) * Dvp, 0.f);
  sc.best_lse.assign(size_t(T), -INFINITY);
  sc.weight.assign(size_t(T), 0.f);
  sc.q.resize(size_t(C) * D);
  sc.kt.resize(D * Bc);
  sc.v.resize(Bc * Dvp);
  sc.s.resize(size_t(C) * Bc);
  sc.o.resize(size_t(C) * Dvp);
  sc.keypos.resize(Bc);
  sc.lse.resize(size_t(C));
  sc.row_sum.resize(size_t(C));

  // Keys (normalised qk rows, transposed) and values of slots [s0, s0 + n) into tile columns [col0, col0 + n),
  // read from the query tile when they are its rows (each qk row is gathered once per chunk).
  auto put_keys = [&](int64_t s0, int64_t n, size_t col0, bool from_queries) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t pos = sc.sorted[size_t(s0 + i)];
      const float* row = from_queries ? sc.q.data() + size_t(i) * D : sc.x.data() + size_t(pos) * D;
      const float scale = sc.inv_norm[size_t(pos)];
      const size_t j = col0 + size_t(i);
      for (size_t d = 0; d < D; ++d) sc.kt[d * Bc + j] = row[d] * scale;
      std::copy_n(sc.vals.data() + size_t(pos) * Dvp, Dvp, sc.v.data() + j * Dvp);
      sc.keypos[j] = pos;
    }
  };
  // The tile's first `prev` columns hold the previous chunk's keys: for chunk 0 the last chunk's (cyclically),
  // afterwards the columns each chunk leaves behind.
  size_t prev = 0;
  if (nchunks > 1) {
    prev = size_t(N - (nchunks - 1) * C);
    put_keys((nchunks - 1) * C, int64_t(prev), 0, false);
  }
  for (int64_t c = 0; c < nchunks; ++c) {
    const int64_t s0 = c * C, rows = std::min(C, N - s0);
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(sc.x.data() + size_t(sc.sorted[size_t(s0 + i)]) * D, D, sc.q.data() + size_t(i) * D);
    put_keys(s0, rows, prev, true);
    const size_t cols = prev + size_t(rows);
    // Rows are scattered over the head's T positions: ask for this chunk's accumulator rows and the next chunk's
    // qk / v rows now, so that they arrive while the tile products run (the merge and the gathers otherwise
    // waited on L2 / L3 misses: a third of the time at T = 4096).
    for (int64_t i = s0; i < std::min(N, s0 + rows + C); ++i) {
      const size_t pos = size_t(sc.sorted[size_t(i)]);
      if (i < s0 + rows) {
        PrefetchRow<1>(sc.acc.data() + pos * Dvp, Dvp);
      } else {
        PrefetchRow<0>(sc.x.data() + pos * D, D);
        PrefetchRow<0>(sc.vals.data() + pos * Dvp, Dvp);
      }
    }
    for (size_t d = 0; d < D; ++d) std::fill(sc.kt.data() + d * Bc + cols, sc.kt.data() + (d + 1) * Bc, 0.f);
    std::fill(sc.v.data() + cols * Dvp, sc.v.data() + Bc * Dvp, 0.f);
    TileGemm(size_t(rows), Bc, D, sc.q.data(), D, sc.kt.data(), Bc, sc.s.data(), Bc, /*accumulate=*/false);
    for (int64_t i = 0; i < rows; ++i)
      sc.lse[size_t(i)] = SoftmaxLshRow(sc.s.data() + size_t(i) * Bc, Bc, cols, sc.keypos.data(),
                                        sc.sorted[size_t(s0 + i)], p.opts.causal, &sc.row_sum[size_t(i)]);
    TileGemm(size_t(rows), Dvp, Bc, sc.s.data(), Bc, sc.v.data(), Dvp, sc.o.data(), Dvp, /*accumulate=*/false);
    // Merge this round's output into the position's accumulator: acc and weight are kept relative to the best
    // log-sum-exp seen so far, so nothing overflows whatever the scores.
    for (int64_t i = 0; i < rows; ++i) {
      const size_t pos = size_t(sc.sorted[size_t(s0 + i)]);
      const float lse = sc.lse[size_t(i)], best = std::max(sc.best_lse[pos], lse);
      const float keep = sc.best_lse[pos] == -INFINITY ? 0.f : std::exp(sc.best_lse[pos] - best);
      const float w = std::exp(lse - best);
      const float add = w / sc.row_sum[size_t(i)];  // o / row_sum is the round's output
      float* acc = sc.acc.data() + pos * Dvp;
      const float* o = sc.o.data() + size_t(i) * Dvp;
      for (size_t d = 0; d < Dvp; ++d) acc[d] = acc[d] * keep + o[d] * add;
      sc.weight[pos] = sc.weight[pos] * keep + w;
      sc.best_lse[pos] = best;
    }
    if (nchunks > 1) {  // this chunk's keys are the next chunk's previous ones
      for (size_t d = 0; d < D; ++d)
        std::memmove(sc.kt.data() + d * Bc, sc.kt.data() + d * Bc + prev, size_t(rows) * sizeof(float));
      std::memmove(sc.v.data(), sc.v.data() + prev * Dvp, size_t(rows) * Dvp * sizeof(float));
      std::memmove(sc.keypos.data(), sc.keypos.data() + prev, size_t(rows) * sizeof(int32_t));
      prev = size_t(rows);
    }
  }

  const size_t elem = dtype_size(p.out.dtype);
  for (int64_t t = 0; t < T; ++t) {
    float* acc = sc.acc.data() + size_t(t) * Dvp;
    const float inv = 1.f / sc.weight[size_t(t)];
    for (size_t d = 0; d < Dv; ++d) acc[d] *= inv;
    char* dst = static_cast<char*>(p.out.data) + LshProblem::row(p.out, b, t, h) * int64_t(elem);
    convert_from_f32(acc, dst, p.out.dtype, Dv);
  }
}

// argmax over [v, -v] (first index on ties, as torch.argmax): the largest value or, if the smallest is further
// from zero, half + the smallest's index. Max and min by vectors, then one scan for the first match: a plain
// running argmax is a chain of dependent compares and took half of the hashing time.
int32_t ArgmaxOfBothSigns(const float* v, size_t half) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  float mx = -INFINITY, mn = INFINITY;
  size_t k = 0;
  if (half >= L) {
    auto vmx = hn::LoadU(d, v), vmn = vmx;
    for (k = L; k + L <= half; k += L) {
      const auto x = hn::LoadU(d, v + k);
      vmx = hn::Max(vmx, x), vmn = hn::Min(vmn, x);
    }
    mx = hn::GetLane(hn::MaxOfLanes(d, vmx)), mn = hn::GetLane(hn::MinOfLanes(d, vmn));
  }
  for (; k < half; ++k) mx = std::max(mx, v[k]), mn = std::min(mn, v[k]);
  const bool positive = mx >= -mn;
  const float target = positive ? mx : mn;
  size_t arg = 0;
  while (arg < half && v[arg] != target) ++arg;
  if (arg == half) arg = 0;  // NaN rows (inputs unchecked): any bucket, but never past the row
  return int32_t(positive ? arg : half + arg);
}

// One (batch, head): rotated = x R for all rounds at once ([T x D] times [D x num_hashes * half]), then per round
// the argmax over [rotated, -rotated] (first index on ties, as torch.argmax).
void HashLshHead(const TensorView& qk, const TensorView& rotations, int32_t* buckets, int64_t task) {
  static thread_local AlignedBuffer<float> x, rot, out;
  const int64_t H = qk.shape[2], T = qk.shape[1], b = task / H, h = task % H;
  const size_t D = size_t(qk.shape[3]), R = size_t(rotations.shape[2]), half = size_t(rotations.shape[3]);
  const size_t Np = Padded(R * half);
  constexpr size_t kRows = 64;
  rot.resize(D * Np);
  const float* rh = static_cast<const float*>(rotations.data) + h * rotations.strides[0];
  for (size_t d = 0; d < D; ++d) {
    for (size_t j = 0; j < R * half; ++j)
      rot[d * Np + j] = rh[int64_t(d) * rotations.strides[1] + int64_t(j / half) * rotations.strides[2] +
                           int64_t(j % half) * rotations.strides[3]];
    std::fill(rot.data() + d * Np + R * half, rot.data() + (d + 1) * Np, 0.f);
  }
  x.resize(kRows * D);
  out.resize(kRows * Np);
  int32_t* head = buckets + (b * H + h) * int64_t(R) * T;
  for (int64_t t0 = 0; t0 < T; t0 += int64_t(kRows)) {
    const size_t rows = size_t(std::min<int64_t>(int64_t(kRows), T - t0));
    const size_t elem = dtype_size(qk.dtype);
    for (size_t i = 0; i < rows; ++i) {
      const char* row = static_cast<const char*>(qk.data) + LshProblem::row(qk, b, t0 + int64_t(i), h) * int64_t(elem);
      convert_to_f32(row, qk.dtype, x.data() + i * D, D);
    }
    TileGemm(rows, Np, D, x.data(), D, rot.data(), Np, out.data(), Np, /*accumulate=*/false);
    for (size_t i = 0; i < rows; ++i)
      for (size_t r = 0; r < R; ++r)
        head[int64_t(r) * T + t0 + int64_t(i)] = ArgmaxOfBothSigns(out.data() + i * Np + r * half, half);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunLshHead);
HWY_EXPORT(HashLshHead);

void lsh_attention(const LshProblem& p) {
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  ThreadPool::global().parallel_for(p.B * p.H, [&](int64_t task, int) { HWY_DYNAMIC_DISPATCH(RunLshHead)(p, task); });
}

void check_lsh_hash_args(const TensorView& qk, const TensorView& rotations, const TensorView& buckets) {
  check_float_tensor(qk, "qk");
  require(qk.ndim == 4, "qk", "must be [batch, time, heads, head_dim], got " + qk.shape_str());
  require(qk.numel() == 0 || qk.stride(-1) == 1, "qk", "last dimension (head_dim) must be contiguous (stride 1)");
  const int64_t B = qk.shape[0], T = qk.shape[1], H = qk.shape[2], D = qk.shape[3];
  require(D >= 1 && D <= kMaxHeadDim, "qk", "head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " +
                                                std::to_string(D));
  require(rotations.dtype == DType::f32, "rotations",
          std::string("must be float32, got ") + dtype_name(rotations.dtype));
  require(rotations.ndim == 4 && rotations.shape[0] == H && rotations.shape[1] == D && rotations.shape[2] >= 1 &&
              rotations.shape[3] >= 1,
          "rotations", "must be [heads=" + std::to_string(H) + ", head_dim=" + std::to_string(D) +
                           ", num_hashes, num_buckets / 2], got " + rotations.shape_str());
  require(rotations.shape[2] <= 64, "rotations", "num_hashes must be <= 64");
  require(rotations.shape[3] <= 4096, "rotations", "num_buckets / 2 must be <= 4096");
  for (int d = 0; d < 4; ++d) require(rotations.strides[d] >= 0, "rotations", "negative strides are not supported");
  require(buckets.dtype == DType::i32 && buckets.is_contiguous() && buckets.ndim == 4 && buckets.shape[0] == B &&
              buckets.shape[1] == H && buckets.shape[2] == rotations.shape[2] && buckets.shape[3] == T,
          "buckets", "must be a contiguous int32 [" + std::to_string(B) + ", " + std::to_string(H) + ", " +
                         std::to_string(rotations.shape[2]) + ", " + std::to_string(T) + "], got " +
                         buckets.shape_str());
}

void lsh_hash(const TensorView& qk, const TensorView& rotations, const TensorView& buckets) {
  check_lsh_hash_args(qk, rotations, buckets);
  const int64_t B = qk.shape[0], H = qk.shape[2];
  active_target();
  int32_t* out = static_cast<int32_t*>(buckets.data);
  ThreadPool::global().parallel_for(B * H, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(HashLshHead)(qk, rotations, out, task);
  });
}

}  // namespace attnzoo
#endif
