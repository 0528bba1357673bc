// Tiled online-softmax prefill (FlashAttention-2 schedule) on CPU.
// One task = (sequence, kv head, block of query rows). The task packs its queries for every q head of the
// kv head's group, then streams key/value tiles: each K tile is packed transposed and each V tile converted
// once, and serves all heads of the group (GQA/MQA reuse). Per head: S = Q K^T, online softmax (running max m,
// running sum l, rescale of the output accumulator), O += P V. Tiles wholly outside the causal / window /
// block-sparse pattern are never touched; tiles wholly inside skip per-element mask tests.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/tiling.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/prefill.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/common/tile_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct Scratch {
  AlignedBuffer<float> q, kt, v, s, o, m, l, row;
};

// Applies softcap / ALiBi / the element mask to one row of scores, then folds the row into the running
// softmax state: returns the factor by which the row's output accumulator must be rescaled.
HWY_INLINE float SoftmaxRow(float* HWY_RESTRICT s, size_t ncols, size_t valid_cols, const TileRowContext& ctx,
                            float* HWY_RESTRICT m, float* HWY_RESTRICT l) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto kNegInf = hn::Set(d, -INFINITY);
  if (ctx.softcap > 0.f) {
    const auto cap = hn::Set(d, ctx.softcap), inv = hn::Set(d, 1.f / ctx.softcap);
    for (size_t j = 0; j < ncols; j += L)
      hn::Store(hn::Mul(cap, hn::Tanh(d, hn::Mul(hn::Load(d, s + j), inv))), d, s + j);
  }
  if (ctx.alibi_slope != 0.f) {
    for (size_t j = 0; j < valid_cols; ++j) {
      const int64_t dist = ctx.qpos - (ctx.kpos0 + int64_t(j));
      s[j] -= ctx.alibi_slope * float(dist < 0 ? -dist : dist);
    }
  }
  if (ctx.partial) {
    for (size_t j = 0; j < valid_cols; ++j)
      if (!ctx.mask->visible(ctx.qpos, ctx.kpos0 + int64_t(j))) s[j] = -INFINITY;
  }
  for (size_t j = valid_cols; j < ncols; ++j) s[j] = -INFINITY;

  auto vmax = kNegInf;
  for (size_t j = 0; j < ncols; j += L) vmax = hn::Max(vmax, hn::Load(d, s + j));
  const float tile_max = hn::GetLane(hn::MaxOfLanes(d, vmax));
  const float m_old = *m;
  const float m_new = std::max(m_old, tile_max);
  if (m_new == -INFINITY) {  // nothing visible yet in this row: contribute zeros
    for (size_t j = 0; j < ncols; j += L) hn::Store(hn::Zero(d), d, s + j);
    return 1.f;
  }
  const auto vm = hn::Set(d, m_new);
  auto vsum = hn::Zero(d);
  for (size_t j = 0; j < ncols; j += L) {
    const auto p = hn::Exp(d, hn::Sub(hn::Load(d, s + j), vm));  // exp(-inf) == 0 for masked entries
    vsum = hn::Add(vsum, p);
    hn::Store(p, d, s + j);
  }
  const float alpha = (m_old == -INFINITY) ? 0.f : std::exp(m_old - m_new);
  *l = *l * alpha + hn::GetLane(hn::SumOfLanes(d, vsum));
  *m = m_new;
  return alpha;
}

HWY_INLINE void ScaleRow(float* HWY_RESTRICT o, size_t n, float alpha) {
  const hn::ScalableTag<float> d;
  const auto va = hn::Set(d, alpha);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::Store(hn::Mul(hn::Load(d, o + j), va), d, o + j);
}

void RunPrefillTask(const AttentionProblem& p, const PrefillPlan& plan, int64_t task_index) {
  static thread_local Scratch sc;
  const PrefillTask& t = plan.tasks[size_t(task_index)];
  const SeqSpan& seq = p.seqs[size_t(t.seq)];
  const size_t Br = size_t(plan.block_q), Bc = size_t(plan.block_k);
  const size_t D = size_t(p.D), Dv = size_t(p.Dv);
  const size_t Dvp = size_t(plan.dv_padded);
  const int64_t G = p.group();
  const int64_t rows = std::min<int64_t>(plan.block_q, seq.Tq - t.q_begin);
  const int64_t offset = seq.Tk - seq.Tq;  // bottom-right alignment: query i sits at key position i + offset

  sc.q.resize(size_t(G) * Br * D);
  sc.kt.resize(D * Bc);
  sc.v.resize(Bc * Dvp);
  sc.s.resize(Br * Bc);
  sc.o.resize(size_t(G) * Br * Dvp);
  sc.m.resize(size_t(G) * Br);
  sc.l.resize(size_t(G) * Br);
  sc.row.resize(std::max(D, Dvp));

  // Pack queries (pre-multiplied by the softmax scale) for every head of the group.
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = t.kv_head * G + g;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t src = seq.q_offset + (t.q_begin + i) * p.qs.token + h * p.qs.head;
      float* dst = sc.q.data() + (size_t(g) * Br + size_t(i)) * D;
      convert_to_f32(static_cast<const char*>(p.q) + src * int64_t(dtype_size(p.q_dtype)), p.q_dtype, dst, D);
      for (size_t d = 0; d < D; ++d) dst[d] *= p.scale;
    }
  }
  std::fill(sc.o.data(), sc.o.data() + size_t(G) * Br * Dvp, 0.f);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = t.kv_head * G + g;
    for (int64_t i = 0; i < int64_t(Br); ++i) {
      sc.m[size_t(g) * Br + size_t(i)] = p.opts.sinks ? p.opts.sinks[h] : -INFINITY;
      sc.l[size_t(g) * Br + size_t(i)] = p.opts.sinks ? 1.f : 0.f;  // the sink's own exp(sink - m) at m = sink
    }
  }

  const MaskGeometry mask = mask_geometry(p.opts);
  const int64_t q_first = t.q_begin + offset, q_last = t.q_begin + rows - 1 + offset;
  const KeyRange range = visible_key_range(mask, q_first, q_last, seq.Tk, plan.block_k);
  const size_t kv_elem = dtype_size(p.kv_dtype);
  for (int64_t k0 = range.begin; k0 < range.end; k0 += plan.block_k) {
    const int64_t cols = std::min<int64_t>(plan.block_k, seq.Tk - k0);
    const TileClass cls = classify_tile(mask, q_first, q_last, k0, k0 + cols - 1);
    if (cls == TileClass::skipped) continue;
    // Pack K^T (D x Bc, padded columns zero) and V (Bc x Dvp, padded rows and columns zero).
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t ksrc = seq.k_offset + (k0 + j) * p.ks.token + t.kv_head * p.ks.head;
      convert_to_f32(static_cast<const char*>(p.k) + ksrc * int64_t(kv_elem), p.kv_dtype, sc.row.data(), D);
      for (size_t d = 0; d < D; ++d) sc.kt[d * Bc + size_t(j)] = sc.row[d];
      const int64_t vsrc = seq.v_offset + (k0 + j) * p.vs.token + t.kv_head * p.vs.head;
      float* vdst = sc.v.data() + size_t(j) * Dvp;
      convert_to_f32(static_cast<const char*>(p.v) + vsrc * int64_t(kv_elem), p.kv_dtype, vdst, Dv);
      std::fill(vdst + Dv, vdst + Dvp, 0.f);
    }
    for (int64_t j = cols; j < int64_t(Bc); ++j) {
      for (size_t d = 0; d < D; ++d) sc.kt[d * Bc + size_t(j)] = 0.f;
      std::fill(sc.v.data() + size_t(j) * Dvp, sc.v.data() + size_t(j + 1) * Dvp, 0.f);
    }
    for (int64_t g = 0; g < G; ++g) {
      const int64_t h = t.kv_head * G + g;
      float* qg = sc.q.data() + size_t(g) * Br * D;
      float* og = sc.o.data() + size_t(g) * Br * Dvp;
      TileGemm(size_t(rows), Bc, D, qg, D, sc.kt.data(), Bc, sc.s.data(), Bc, /*accumulate=*/false);
      TileRowContext ctx{p.opts.softcap, p.opts.alibi_slopes ? p.opts.alibi_slopes[h] : 0.f,
                         cls == TileClass::partial, &mask, 0, k0};
      for (int64_t i = 0; i < rows; ++i) {
        ctx.qpos = q_first + i;
        const float alpha = SoftmaxRow(sc.s.data() + size_t(i) * Bc, Bc, size_t(cols), ctx,
                                       &sc.m[size_t(g) * Br + size_t(i)], &sc.l[size_t(g) * Br + size_t(i)]);
        if (alpha != 1.f) ScaleRow(og + size_t(i) * Dvp, Dvp, alpha);
      }
      TileGemm(size_t(rows), Dvp, Bc, sc.s.data(), Bc, sc.v.data(), Dvp, og, Dvp, /*accumulate=*/true);
    }
  }

  const size_t o_elem = dtype_size(p.o_dtype);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = t.kv_head * G + g;
    for (int64_t i = 0; i < rows; ++i) {
      const float l = sc.l[size_t(g) * Br + size_t(i)];
      float* orow = sc.o.data() + (size_t(g) * Br + size_t(i)) * Dvp;
      ScaleRow(orow, Dvp, l > 0.f ? 1.f / l : 0.f);
      const int64_t dst = seq.o_offset + (t.q_begin + i) * p.os.token + h * p.os.head;
      convert_from_f32(orow, static_cast<char*>(p.o) + dst * int64_t(o_elem), p.o_dtype, Dv);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunPrefillTask);

void attention_prefill_run(const AttentionProblem& p) {
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  const PrefillPlan plan = make_prefill_plan(p);
  ThreadPool::global().parallel_for(int64_t(plan.tasks.size()), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunPrefillTask)(p, plan, task);
  });
}

void attention_prefill(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                       const AttentionOptions& opts, const VarlenInfo& varlen) {
  attention_prefill_run(make_prefill_problem(q, k, v, out, opts, varlen));
}

}  // namespace attnzoo
#endif
