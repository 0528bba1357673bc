// Decode attention on CPU: a few new queries against a long KV cache, which makes it memory-bound.
// One task = (sequence, chunk of keys, kv heads - normally all of them). The task holds every query row that
// shares those kv heads (Tq new tokens x G = Hq / Hkv heads each), so each cached K and V row is read from
// memory once and serves all of them. Keys stream in tiles: each K row is widened to f32 in registers
// (PromoteTo for bf16 / f16) and dotted with the head's query rows, key by key across heads so the cache is
// read in memory order; then per head an online-softmax update and a register-blocked GEMM fold the tile's
// widened V rows into the outputs. A paged cache is walked block by block (one block-table lookup per
// block). Chunks of one sequence leave (max, sum, unnormalised output) behind and are merged with the
// log-sum-exp rule.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/tiling.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/decode.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/common/tile_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kRowsPerPass = 8;  // query rows whose accumulators live in registers during one K-row pass

// What one score row needs to finish its scores (a copy of prefill's notion, kept local so the two kernels
// can evolve independently).
struct RowContext {
  float softcap;
  float alibi_slope;
  bool partial;  // the tile straddles the mask: test every element
  const MaskGeometry* mask;
  int64_t qpos;
  int64_t kpos0;
};

// Walks a chunk's keys a few positions ahead of the arithmetic and prefetches their K rows into L1 and their
// V rows into L2 (V rows are consumed after the tile's K pass, head by head, so they must survive a whole tile).
// Hardware prefetchers stop at page edges and follow one stream at a time; K, V and the block table make three.
template <class T>
class RowPrefetcher {
 public:
  static constexpr int64_t kAhead = 8;  // keys: enough to cover memory latency, few enough not to flood L1

  RowPrefetcher(const DecodeProblem& p, int64_t b, int64_t hk_begin, int64_t heads, int64_t end)
      : p_(p), b_(b), hk_(hk_begin), heads_(heads), end_(end),
        k_bytes_(size_t(p.D) * sizeof(T)), v_bytes_(size_t(p.Dv) * sizeof(T)) {}

  // Called before processing keys from `pos` on: keeps the prefetched window kAhead keys past pos.
  void Seek(int64_t pos) {
    if (pos_ < pos) Reposition(pos);
    while (pos_ < end_ && pos_ < pos + kAhead) Step();
  }
  // Called once per key processed: prefetches one more key (all heads of the task).
  void Step() {
    if (pos_ >= end_) return;
    for (int64_t h = 0; h < heads_; ++h) {
      const char* k = reinterpret_cast<const char*>(k_ + h * p_.k_head);
      const char* v = reinterpret_cast<const char*>(v_ + h * p_.v_head);
      for (size_t i = 0; i < k_bytes_; i += 64) hwy::Prefetch(k + i);
      for (size_t i = 0; i < v_bytes_; i += 64) PrefetchL2(v + i);
    }
    ++pos_;
    if (++off_ == p_.block_size) {
      Reposition(pos_);
    } else {
      k_ += p_.k_token;
      v_ += p_.v_token;
    }
  }

 private:
  static void PrefetchL2(const char* p) {
#if HWY_ARCH_X86
    __builtin_prefetch(p, /*write=*/0, /*locality=*/2);
#else
    hwy::Prefetch(p);
#endif
  }
  void Reposition(int64_t pos) {
    pos_ = pos;
    if (pos >= end_) return;
    off_ = pos % p_.block_size;
    const int64_t phys = p_.physical_block(b_, pos / p_.block_size);
    k_ = static_cast<const T*>(p_.k) + phys * p_.k_block + off_ * p_.k_token + hk_ * p_.k_head;
    v_ = static_cast<const T*>(p_.v) + phys * p_.v_block + off_ * p_.v_token + hk_ * p_.v_head;
  }

  const DecodeProblem& p_;
  const int64_t b_, hk_, heads_, end_;
  const size_t k_bytes_, v_bytes_;
  int64_t pos_ = -1, off_ = 0;
  const T* k_ = nullptr;
  const T* v_ = nullptr;
};

// A stretch of keys that sit in one cache block: consecutive rows token-stride apart.
struct KeyRun {
  int64_t first;  // tile-relative index of its first key
  int64_t count;
  int64_t k_offset, v_offset;  // elements to its first key's row of kv head 0
};

struct DecodeScratch {
  AlignedBuffer<float> q, s, v, o, m, l;
  std::vector<KeyRun> runs;
};

inline float ScalarToF32(float x) { return x; }
inline float ScalarToF32(hwy::bfloat16_t x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return bf16_to_f32(bits);
}
inline float ScalarToF32(hwy::float16_t x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return f16_to_f32(bits);
}

template <class T>
HWY_INLINE VF LoadF32(DF df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    const hn::Rebind<T, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, p));
  }
}

// The last D % L elements of a row, widened and zero padded to a full vector.
template <class T>
HWY_INLINE VF LoadTailF32(DF df, const T* HWY_RESTRICT p, size_t n) {
  alignas(64) float tmp[HWY_MAX_BYTES / sizeof(float)] = {};
  for (size_t i = 0; i < n; ++i) tmp[i] = ScalarToF32(p[i]);
  return hn::Load(df, tmp);
}

#if HWY_TARGET == HWY_SCALAR
HWY_INLINE void SumsOfFour(VF a, VF b, VF c, VF e, float* HWY_RESTRICT out) {
  out[0] = hn::GetLane(a);
  out[1] = hn::GetLane(b);
  out[2] = hn::GetLane(c);
  out[3] = hn::GetLane(e);
}
#else
// Adds the 128-bit blocks of v and stores the resulting four lanes.
template <class D>
HWY_INLINE void StoreBlockSum(D d, hn::Vec<D> v, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    StoreBlockSum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}

// The lane sums of four vectors: a transposing tree (two interleave levels, then one fold of the blocks)
// costs about a third of four separate full reductions, which matter at one reduction per (row, key).
HWY_INLINE void SumsOfFour(VF a, VF b, VF c, VF e, float* HWY_RESTRICT out) {
  const DF d;
  const hn::Repartition<double, DF> dd;
  // Per 128-bit block: ab = [a0+a2, b0+b2, a1+a3, b1+b3], likewise ce.
  const VF ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));
  const VF ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
  const auto ab64 = hn::BitCast(dd, ab), ce64 = hn::BitCast(dd, ce);
  // Per block: [sum a, sum b, sum c, sum e] over that block's lanes.
  const VF sums = hn::Add(hn::BitCast(d, hn::InterleaveLower(dd, ab64, ce64)),
                          hn::BitCast(d, hn::InterleaveUpper(dd, ab64, ce64)));
  StoreBlockSum(d, sums, out);
}
#endif

// s[r * lds] = dot(q row r, k row) for kNR query rows (q rows are Dp apart, zero padded past D).
template <size_t kNR, class T>
HWY_INLINE void ScoreRows(const T* HWY_RESTRICT k, size_t D, const float* HWY_RESTRICT q, size_t Dp,
                          float* HWY_RESTRICT s, size_t lds) {
  const DF df;
  const size_t L = hn::Lanes(df);
  VF acc[kNR];
  for (size_t r = 0; r < kNR; ++r) acc[r] = hn::Zero(df);
  size_t d = 0;
  for (; d + L <= D; d += L) {
    const VF kv = LoadF32(df, k + d);
    for (size_t r = 0; r < kNR; ++r) acc[r] = hn::MulAdd(hn::Load(df, q + r * Dp + d), kv, acc[r]);
  }
  if (d < D) {
    const VF kv = LoadTailF32(df, k + d, D - d);
    for (size_t r = 0; r < kNR; ++r) acc[r] = hn::MulAdd(hn::Load(df, q + r * Dp + d), kv, acc[r]);
  }
  size_t r = 0;
  for (; r + 4 <= kNR; r += 4) {
    alignas(16) float sums[4];
    SumsOfFour(acc[r], acc[r + 1], acc[r + 2], acc[r + 3], sums);
    for (size_t i = 0; i < 4; ++i) s[(r + i) * lds] = sums[i];
  }
  for (; r < kNR; ++r) s[r * lds] = hn::GetLane(hn::SumOfLanes(df, acc[r]));
}

// Scores of one key against all R query rows, kRowsPerPass rows per pass over the (L1-resident) K row.
template <class T>
HWY_INLINE void ScoreKey(const T* HWY_RESTRICT k, size_t D, const float* HWY_RESTRICT q, size_t Dp, size_t R,
                         float* HWY_RESTRICT s, size_t lds) {
  for (size_t r0 = 0; r0 < R; r0 += kRowsPerPass) {
    const float* qr = q + r0 * Dp;
    float* sr = s + r0 * lds;
    switch (std::min(kRowsPerPass, R - r0)) {
      case 8: ScoreRows<8>(k, D, qr, Dp, sr, lds); break;
      case 7: ScoreRows<7>(k, D, qr, Dp, sr, lds); break;
      case 6: ScoreRows<6>(k, D, qr, Dp, sr, lds); break;
      case 5: ScoreRows<5>(k, D, qr, Dp, sr, lds); break;
      case 4: ScoreRows<4>(k, D, qr, Dp, sr, lds); break;
      case 3: ScoreRows<3>(k, D, qr, Dp, sr, lds); break;
      case 2: ScoreRows<2>(k, D, qr, Dp, sr, lds); break;
      default: ScoreRows<1>(k, D, qr, Dp, sr, lds); break;
    }
  }
}

// dst[0, n) = src widened to f32, dst[n, npad) = 0 (the GEMM reads whole vectors).
template <class T>
HWY_INLINE void WidenRow(const T* HWY_RESTRICT src, size_t n, size_t npad, float* HWY_RESTRICT dst) {
  const DF df;
  const size_t L = hn::Lanes(df);
  size_t d = 0;
  for (; d + L <= n; d += L) hn::StoreU(LoadF32(df, src + d), df, dst + d);
  for (; d < n; ++d) dst[d] = ScalarToF32(src[d]);
  for (; d < npad; ++d) dst[d] = 0.f;
}

HWY_INLINE void ScaleRow(float* HWY_RESTRICT o, size_t n, float alpha) {
  const DF df;
  const auto va = hn::Set(df, alpha);
  for (size_t j = 0; j < n; j += hn::Lanes(df)) hn::Store(hn::Mul(hn::Load(df, o + j), va), df, o + j);
}

// Applies softcap, ALiBi and (in partial tiles) the element mask to one row of scores, folds it into the
// running (m, l) and leaves exp(s - m) in place; returns the factor for the row's output accumulator.
HWY_INLINE float SoftmaxRow(float* HWY_RESTRICT s, size_t cols, const RowContext& ctx, float* m, float* l) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t ncols = (cols + L - 1) / L * L;
  if (ctx.softcap > 0.f) {
    const auto cap = hn::Set(df, ctx.softcap), inv = hn::Set(df, 1.f / ctx.softcap);
    for (size_t j = 0; j < ncols; j += L)
      hn::Store(hn::Mul(cap, hn::Tanh(df, hn::Mul(hn::Load(df, s + j), inv))), df, s + j);
  }
  if (ctx.alibi_slope != 0.f) {
    for (size_t j = 0; j < cols; ++j) {
      const int64_t dist = ctx.qpos - (ctx.kpos0 + int64_t(j));
      s[j] -= ctx.alibi_slope * float(dist < 0 ? -dist : dist);
    }
  }
  if (ctx.partial) {
    for (size_t j = 0; j < cols; ++j)
      if (!ctx.mask->visible(ctx.qpos, ctx.kpos0 + int64_t(j))) s[j] = -INFINITY;
  }
  for (size_t j = cols; j < ncols; ++j) s[j] = -INFINITY;

  auto vmax = hn::Set(df, -INFINITY);
  for (size_t j = 0; j < ncols; j += L) vmax = hn::Max(vmax, hn::Load(df, s + j));
  const float m_old = *m;
  const float m_new = std::max(m_old, hn::GetLane(hn::MaxOfLanes(df, vmax)));
  if (m_new == -INFINITY) {  // nothing visible to this row yet: the tile adds nothing
    for (size_t j = 0; j < ncols; j += L) hn::Store(hn::Zero(df), df, s + j);
    return 1.f;
  }
  const auto vm = hn::Set(df, m_new);
  auto vsum = hn::Zero(df);
  for (size_t j = 0; j < ncols; j += L) {
    const auto e = hn::Exp(df, hn::Sub(hn::Load(df, s + j), vm));  // masked entries: exp(-inf) = 0
    vsum = hn::Add(vsum, e);
    hn::Store(e, df, s + j);
  }
  const float alpha = (m_old == -INFINITY) ? 0.f : std::exp(m_old - m_new);
  *l = *l * alpha + hn::GetLane(hn::SumOfLanes(df, vsum));
  *m = m_new;
  return alpha;
}

template <class T>
void RunChunk(const DecodeProblem& p, const DecodePlan& plan, const DecodeChunk& c, float* partials) {
  static thread_local DecodeScratch sc;
  const size_t G = size_t(p.group()), R = size_t(p.rows()), H = size_t(plan.heads_per_task), HR = H * R;
  const size_t D = size_t(p.D), Dv = size_t(p.Dv);
  const size_t Dp = (D + 15) / 16 * 16, Dvp = (Dv + 15) / 16 * 16, Bc = size_t(plan.block_k);
  sc.q.resize(HR * Dp);
  sc.s.resize(HR * Bc);
  sc.v.resize(Bc * Dvp);
  sc.o.resize(HR * Dvp);
  sc.m.resize(HR);
  sc.l.resize(HR);
  sc.runs.resize(Bc);

  const int64_t b = c.b, hk0 = c.hk_begin;
  const int64_t len = p.seqlens[b];
  const int64_t q_first = len - p.Tq, q_last = len - 1;
  // State row x = (kv head hk0 + x / R, new token (x % R) / G, head in group x % G); its query is
  // pre-multiplied by the softmax scale.
  auto head_of = [&](size_t x) { return (hk0 + int64_t(x / R)) * int64_t(G) + int64_t(x % G); };
  auto token_of = [&](size_t x) { return int64_t((x % R) / G); };
  const size_t q_elem = dtype_size(p.q_dtype);
  const bool with_sink = p.opts.sinks != nullptr && c.slot < 0;  // split chunks: the merge adds the sink
  for (size_t x = 0; x < HR; ++x) {
    const int64_t h = head_of(x);
    float* dst = sc.q.data() + x * Dp;
    const int64_t src = b * p.q_batch + token_of(x) * p.q_token + h * p.q_head;
    convert_to_f32(static_cast<const char*>(p.q) + src * int64_t(q_elem), p.q_dtype, dst, D);
    for (size_t d = 0; d < D; ++d) dst[d] *= p.scale;
    std::fill(dst + D, dst + Dp, 0.f);
    sc.m[x] = with_sink ? p.opts.sinks[h] : -INFINITY;
    sc.l[x] = with_sink ? 1.f : 0.f;  // the sink's own exp(sink - m) at m = sink
  }
  std::fill(sc.o.data(), sc.o.data() + HR * Dvp, 0.f);

  const T* kcache = static_cast<const T*>(p.k);
  const T* vcache = static_cast<const T*>(p.v);
  const MaskGeometry mask = mask_geometry(p.opts);
  RowPrefetcher<T> prefetch(p, b, hk0, int64_t(H), c.k_end);
  for (int64_t k0 = c.k_begin; k0 < c.k_end; k0 += plan.block_k) {
    const int64_t k1 = std::min(c.k_end, k0 + plan.block_k);
    const TileClass cls = classify_tile(mask, q_first, q_last, k0, k1 - 1);
    if (cls == TileClass::skipped) continue;
    // The tile's keys as runs inside cache blocks: one block-table lookup per block.
    size_t num_runs = 0;
    for (int64_t pos = k0; pos < k1; ++num_runs) {
      const int64_t off = pos % p.block_size;
      const int64_t n = std::min(p.block_size - off, k1 - pos);
      const int64_t phys = p.physical_block(b, pos / p.block_size);
      sc.runs[num_runs] = {pos - k0, n, phys * p.k_block + off * p.k_token, phys * p.v_block + off * p.v_token};
      pos += n;
    }
    // Scores, key by key over all heads of the task: the K rows stream in memory order.
    prefetch.Seek(k0);
    for (size_t ri = 0; ri < num_runs; ++ri) {
      const KeyRun& run = sc.runs[ri];
      for (int64_t i = 0; i < run.count; ++i) {
        prefetch.Step();
        const T* krow = kcache + run.k_offset + i * p.k_token;
        const size_t j = size_t(run.first + i);
        for (size_t h = 0; h < H; ++h)
          ScoreKey(krow + (hk0 + int64_t(h)) * p.k_head, D, sc.q.data() + h * R * Dp, Dp, R,
                   sc.s.data() + h * R * Bc + j, Bc);
      }
    }
    const size_t cols = size_t(k1 - k0);
    RowContext ctx{p.opts.softcap, 0.f, cls == TileClass::partial, &mask, 0, k0};
    for (size_t h = 0; h < H; ++h) {
      float* s_head = sc.s.data() + h * R * Bc;
      float* o_head = sc.o.data() + h * R * Dvp;
      for (size_t r = 0; r < R; ++r) {
        const size_t x = h * R + r;
        ctx.alibi_slope = p.opts.alibi_slopes ? p.opts.alibi_slopes[head_of(x)] : 0.f;
        ctx.qpos = q_first + token_of(x);
        const float alpha = SoftmaxRow(s_head + r * Bc, cols, ctx, &sc.m[x], &sc.l[x]);
        if (alpha != 1.f) ScaleRow(o_head + r * Dvp, Dvp, alpha);
      }
      // This head's V rows (prefetched into L2 during the K pass), widened once, serve all its R rows.
      const int64_t v_head = (hk0 + int64_t(h)) * p.v_head;
      for (size_t ri = 0; ri < num_runs; ++ri) {
        const KeyRun& run = sc.runs[ri];
        for (int64_t i = 0; i < run.count; ++i)
          WidenRow(vcache + run.v_offset + i * p.v_token + v_head, Dv, Dvp,
                   sc.v.data() + size_t(run.first + i) * Dvp);
      }
      TileGemm(R, Dvp, cols, s_head, Bc, sc.v.data(), Dvp, o_head, Dvp, /*accumulate=*/true);
    }
  }

  if (c.slot >= 0) {  // partial state for the merge: m[HR], l[HR], o[HR][Dv]
    float* dst = partials + size_t(c.slot) * HR * (Dv + 2);
    std::copy(sc.m.data(), sc.m.data() + HR, dst);
    std::copy(sc.l.data(), sc.l.data() + HR, dst + HR);
    for (size_t x = 0; x < HR; ++x)
      std::copy(sc.o.data() + x * Dvp, sc.o.data() + x * Dvp + Dv, dst + 2 * HR + x * Dv);
    return;
  }
  const size_t o_elem = dtype_size(p.o_dtype);
  for (size_t x = 0; x < HR; ++x) {
    float* orow = sc.o.data() + x * Dvp;
    ScaleRow(orow, Dvp, sc.l[x] > 0.f ? 1.f / sc.l[x] : 0.f);
    const int64_t dst = b * p.o_batch + token_of(x) * p.o_token + head_of(x) * p.o_head;
    convert_from_f32(orow, static_cast<char*>(p.o) + dst * int64_t(o_elem), p.o_dtype, Dv);
  }
}

void RunDecodeChunk(const DecodeProblem& p, const DecodePlan& plan, int64_t index, float* partials) {
  const DecodeChunk& c = plan.chunks[size_t(index)];
  switch (p.kv_dtype) {
    case DType::bf16: return RunChunk<hwy::bfloat16_t>(p, plan, c, partials);
    case DType::f16: return RunChunk<hwy::float16_t>(p, plan, c, partials);
    default: return RunChunk<float>(p, plan, c, partials);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunDecodeChunk);

void attention_decode_run(const DecodeProblem& p) {
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  ThreadPool& pool = ThreadPool::global();
  const DecodePlan plan = make_decode_plan(p, pool.num_threads());
  std::vector<float> partials(size_t(plan.num_slots * plan.heads_per_task * p.rows() * (p.Dv + 2)));
  pool.parallel_for(int64_t(plan.chunks.size()), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunDecodeChunk)(p, plan, task, partials.data());
  });
  if (plan.merges.empty()) return;
  pool.parallel_for(int64_t(plan.merges.size()), [&](int64_t task, int) {
    merge_decode_chunks(p, plan, plan.merges[size_t(task)], partials.data());
  });
}

void attention_decode(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                      const AttentionOptions& opts) {
  attention_decode_run(make_decode_problem(q, cache, out, opts));
}

}  // namespace attnzoo
#endif
