// Tiled online-softmax prefill (FlashAttention-2 schedule) on CPU.
// One task = (sequence, kv head, block of query rows). The task packs its queries for every q head of the
// kv head's group, then streams key/value tiles: each K tile is packed transposed and each V tile converted
// once, and serves all heads of the group (GQA/MQA reuse); the bf16 pair tiles (AMX or vdpbf16ps) were packed
// once for every query block beforehand (prefill_pairs.h). Per head: S = Q K^T, online softmax (running max m,
// running sum l, rescale of the output accumulator), O += P V. Tiles wholly outside the causal / window /
// block-sparse pattern are never touched; tiles wholly inside skip per-element mask tests; a partly visible tile
// whose values hold a NaN or Inf multiplies only its visible pairs (prefill_hidden_values-inl.h). Keys come from
// contiguous K/V or from a paged cache: each tile first resolves its rows' addresses (one block-table lookup
// per cache block), and the packing reads the rows through those addresses either way.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/common/bf16_dot.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/prefill_pairs.h"
#include "kernels/softmax/tiling.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/prefill.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/common/fast_exp2-inl.h"
#include "kernels/common/tile_gemm-inl.h"
#include "kernels/softmax/prefill_hidden_values-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct Scratch {
  AlignedBuffer<float> q, kt, v, s, o, m, l, row;
  AlignedBuffer<uint32_t> q2, p2;  // bf16 pairs for the tile products (K^T and V: PackedKeyValues)
  std::vector<int64_t> krow, vrow;  // per key of the tile: element offset of its K / V row (kv head 0)
  std::vector<int64_t> ksrow, vsrow;  // quantized caches: offset of its K / V scale (kv head 0)
};

// A tile row's scores as the softmax reads them: multiplied by `scale` (skipped at 1), soft-capped, ALiBi's
// distance penalty, hidden keys and the columns past the tile's keys at -inf.
HWY_INLINE void PrepareScores(float* HWY_RESTRICT s, size_t ncols, size_t valid_cols, const TileRowContext& ctx,
                              float scale) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  if (scale != 1.f) {
    const auto sc = hn::Set(d, scale);
    for (size_t j = 0; j < ncols; j += L) hn::Store(hn::Mul(hn::Load(d, s + j), sc), d, s + j);
  }
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
}

// Applies softcap / ALiBi / the element mask to one row of scores, then folds the row into the running
// softmax state: returns the factor by which the row's output accumulator must be rescaled.
HWY_INLINE float SoftmaxRow(float* HWY_RESTRICT s, size_t ncols, size_t valid_cols, const TileRowContext& ctx,
                            float* HWY_RESTRICT m, float* HWY_RESTRICT l) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  PrepareScores(s, ncols, valid_cols, ctx, ctx.score_scale);

  const float tile_max = MaxOrNaN(d, s, ncols);
  if (std::isnan(tile_max)) return PoisonRow(d, s, ncols, l);
  const float m_old = *m;
  const float m_new = std::max(m_old, tile_max);
  if (m_new == -INFINITY) {  // nothing visible yet in this row: contribute zeros
    for (size_t j = 0; j < ncols; j += L) hn::Store(hn::Zero(d), d, s + j);
    return 1.f;
  }
  const float row_sum = ExpMinusMaxInPlace(d, s, ncols, m_new);
  const float alpha = (m_old == -INFINITY) ? 0.f : std::exp(m_old - m_new);
  *l = *l * alpha + row_sum;
  *m = m_new;
  return alpha;
}

// How far (natural log) a row's maximum may rise before the bf16 path rescales: FlashAttention-4's lazy
// rescaling. Weights stay below e^8 ~ 3000 (bf16 keeps its relative precision at any magnitude, the f32 sums
// have room to spare), and after a row's first tiles its output accumulator is almost never rescaled.
constexpr float kLazyRescale = 8.f;

// SoftmaxRow for the bf16 tiles: raw scores from the products, the softmax scale folded into the exponent's
// multiply (no pass of its own) unless softcap or ALiBi need the scaled score first, and a lazy running maximum.
HWY_INLINE float SoftmaxRowBf16(float* HWY_RESTRICT s, size_t ncols, size_t valid_cols, TileRowContext ctx,
                                float* HWY_RESTRICT m, float* HWY_RESTRICT l) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  // The scale multiplies raw scores in the exponent unless softcap or ALiBi need the scaled score first.
  const bool prescale = ctx.softcap > 0.f || ctx.alibi_slope != 0.f || !(ctx.score_scale > 0.f);
  const float fold = prescale ? 1.f : ctx.score_scale;
  PrepareScores(s, ncols, valid_cols, ctx, prescale ? ctx.score_scale : 1.f);

  const float raw_max = MaxOrNaN(d, s, ncols);
  if (std::isnan(raw_max)) return PoisonRow(d, s, ncols, l);
  const float tile_max = raw_max * fold;
  const float m_old = *m;
  float m_new = m_old, alpha = 1.f;
  if (tile_max > m_old + kLazyRescale || m_old == -INFINITY) {
    m_new = std::max(m_old, tile_max);
    if (m_new == -INFINITY) {  // nothing visible yet in this row: contribute zeros
      for (size_t j = 0; j < ncols; j += L) hn::Store(hn::Zero(d), d, s + j);
      return 1.f;
    }
    alpha = m_old == -INFINITY ? 0.f : std::exp(m_old - m_new);
  }
  const auto c = hn::Set(d, fold * 1.44269504088896341f), bias = hn::Set(d, -m_new * 1.44269504088896341f);
  auto vsum = hn::Zero(d);
  for (size_t j = 0; j < ncols; j += L) {
    // Exponents stay below kLazyRescale * log2 e; the weights are rounded to bf16 next.
    const auto p = FastExp2</*kDegree=*/5, /*kClampHigh=*/false>(d, hn::MulAdd(hn::Load(d, s + j), c, bias));
    vsum = hn::Add(vsum, p);
    hn::Store(p, d, s + j);
  }
  *l = *l * alpha + hn::GetLane(hn::SumOfLanes(d, vsum));
  *m = m_new;
  return alpha;
}

HWY_INLINE void ScaleRow(float* HWY_RESTRICT o, size_t n, float alpha) {
  const hn::ScalableTag<float> d;
  const auto va = hn::Set(d, alpha);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::Store(hn::Mul(hn::Load(d, o + j), va), d, o + j);
}

const char* ElementPtr(const void* base, DType t, int64_t offset) {
  return static_cast<const char*>(base) + offset * int64_t(dtype_size(t));
}

// bf16 pairs straight from bf16 memory: no rounding, the values are already bf16.
void PackPairs(const uint16_t* src, size_t n, uint32_t* dst) {
  std::memcpy(dst, src, n / 2 * sizeof(uint32_t));  // little-endian: a bf16 row is its pairs
  if (n & 1) dst[n / 2] = src[n - 1];
}

// Element offsets of the tile's K and V rows [k0, k0 + cols) for kv head 0.
void ResolveTileRows(const AttentionProblem& p, const SeqSpan& seq, int64_t k0, int64_t cols, Scratch& sc) {
  if (!seq.blocks) {
    for (int64_t j = 0; j < cols; ++j) {
      sc.krow[size_t(j)] = seq.k_offset + (k0 + j) * p.ks.token;
      sc.vrow[size_t(j)] = seq.v_offset + (k0 + j) * p.vs.token;
    }
    return;
  }
  for (int64_t pos = k0; pos < k0 + cols;) {
    const int64_t off = pos % p.block_size, block = seq.blocks[pos / p.block_size];
    const int64_t n = std::min(p.block_size - off, k0 + cols - pos);
    for (int64_t i = 0; i < n; ++i) {
      sc.krow[size_t(pos - k0 + i)] = block * p.k_block + (off + i) * p.ks.token;
      sc.vrow[size_t(pos - k0 + i)] = block * p.v_block + (off + i) * p.vs.token;
    }
    pos += n;
  }
}

void ResolveTileScales(const AttentionProblem& p, const SeqSpan& seq, int64_t k0, int64_t cols, Scratch& sc) {
  sc.ksrow.resize(size_t(cols));
  sc.vsrow.resize(size_t(cols));
  for (int64_t j = 0; j < cols; ++j) {
    sc.ksrow[size_t(j)] = p.scale_row(p.k_scale, seq, k0 + j);
    sc.vsrow[size_t(j)] = p.scale_row(p.v_scale, seq, k0 + j);
  }
}

// Asks for keys [j_begin, j_end) of the next tile (K and V rows, contiguous caches) to be brought into L2 while
// this tile computes. Rows Hkv * D elements apart (4 KiB for f32 at Hkv=8, D=128) each sit in their own page,
// where the hardware prefetcher sees a few lines per page only, so without this every tile's packing waited
// for its rows from L3 or memory.
void PrefetchKeyRows(const AttentionProblem& p, const SeqSpan& seq, int64_t kv_head, int64_t j_begin,
                     int64_t j_end) {
  const int64_t elem = int64_t(dtype_size(p.kv_dtype));
  const int64_t kbytes = p.D * elem, vbytes = p.Dv * elem;
  for (int64_t j = j_begin; j < j_end; ++j) {
    const char* krow = ElementPtr(p.k, p.kv_dtype, seq.k_offset + j * p.ks.token + kv_head * p.ks.head);
    const char* vrow = ElementPtr(p.v, p.kv_dtype, seq.v_offset + j * p.vs.token + kv_head * p.vs.head);
    for (int64_t b = 0; b < kbytes; b += 64) __builtin_prefetch(krow + b, 0, 2);
    for (int64_t b = 0; b < vbytes; b += 64) __builtin_prefetch(vrow + b, 0, 2);
  }
}

// Writes four f32 key rows into columns j..j+3 of K^T (D x Bc) by 4 x 4 blocks: half the instructions of
// element-wise copying (packing was ~4% of an AVX2 prefill, most of it this transpose). Returns how many leading
// dims it wrote (D rounded down to a multiple of 4; 0 on targets without 128-bit vectors).
size_t TransposeFourKeys(const float* const r[4], size_t D, float* HWY_RESTRICT kt, size_t Bc) {
#if HWY_MAX_BYTES >= 16
  const hn::Full128<float> d4;
  size_t d = 0;
  for (; d + 4 <= D; d += 4) {
    const auto a = hn::LoadU(d4, r[0] + d), b = hn::LoadU(d4, r[1] + d);
    const auto c = hn::LoadU(d4, r[2] + d), e = hn::LoadU(d4, r[3] + d);
    const auto ab_lo = hn::InterleaveLower(d4, a, b), ce_lo = hn::InterleaveLower(d4, c, e);  // a0 b0 a1 b1
    const auto ab_hi = hn::InterleaveUpper(d4, a, b), ce_hi = hn::InterleaveUpper(d4, c, e);  // a2 b2 a3 b3
    hn::StoreU(hn::ConcatLowerLower(d4, ce_lo, ab_lo), d4, kt + d * Bc);
    hn::StoreU(hn::ConcatUpperUpper(d4, ce_lo, ab_lo), d4, kt + (d + 1) * Bc);
    hn::StoreU(hn::ConcatLowerLower(d4, ce_hi, ab_hi), d4, kt + (d + 2) * Bc);
    hn::StoreU(hn::ConcatUpperUpper(d4, ce_hi, ab_hi), d4, kt + (d + 3) * Bc);
  }
  return d;
#else
  (void)r, (void)D, (void)kt, (void)Bc;
  return 0;
#endif
}

// K^T as f32 (D x Bc) and, unless the product reads V in place, V as f32 (Bc x Dvp); padding rows and columns
// are zero so they add nothing. f32 K rows are transposed straight from the cache, without a staging copy.
void PackKeyValueTile(const AttentionProblem& p, int64_t kv_head, int64_t cols, size_t Bc, size_t Dvp, bool pack_v,
                      Scratch& sc) {
  const size_t D = size_t(p.D), Dv = size_t(p.Dv);
  const bool plain_f32 = p.kv_dtype == DType::f32 && !p.k_scale.data;
  int64_t j4 = 0;  // keys [0, j4) of plain f32 K go by 4 x 4 blocks, the rest one by one
  if (plain_f32) {
    for (; j4 + 4 <= cols; j4 += 4) {
      const float* r[4];
      for (int64_t i = 0; i < 4; ++i)
        r[i] = static_cast<const float*>(p.k) + sc.krow[size_t(j4 + i)] + kv_head * p.ks.head;
      for (size_t d = TransposeFourKeys(r, D, sc.kt.data() + size_t(j4), Bc); d < D; ++d)
        for (int64_t i = 0; i < 4; ++i) sc.kt[d * Bc + size_t(j4 + i)] = r[i][d];
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    const void* krow = ElementPtr(p.k, p.kv_dtype, sc.krow[size_t(j)] + kv_head * p.ks.head);
    const void* vrow = ElementPtr(p.v, p.kv_dtype, sc.vrow[size_t(j)] + kv_head * p.vs.head);
    float* vdst = sc.v.data() + size_t(j) * Dvp;
    if (j >= j4) {
      const float* kf32 = plain_f32 ? static_cast<const float*>(krow) : sc.row.data();
      if (p.k_scale.data) {  // quantized: dequantized while packing
        dequantize_kv_row(krow, p.kv_dtype, p.k_scale.data[sc.ksrow[size_t(j)] + kv_head * p.k_scale.head],
                          sc.row.data(), D);
      } else if (!plain_f32) {
        convert_to_f32(krow, p.kv_dtype, sc.row.data(), D);
      }
      for (size_t d = 0; d < D; ++d) sc.kt[d * Bc + size_t(j)] = kf32[d];
    }
    if (!pack_v) continue;
    if (p.k_scale.data) {
      dequantize_kv_row(vrow, p.kv_dtype, p.v_scale.data[sc.vsrow[size_t(j)] + kv_head * p.v_scale.head], vdst,
                        Dv);
    } else {
      convert_to_f32(vrow, p.kv_dtype, vdst, Dv);
    }
    std::fill(vdst + Dv, vdst + Dvp, 0.f);
  }
  for (size_t j = size_t(cols); j < Bc; ++j) {
    for (size_t d = 0; d < D; ++d) sc.kt[d * Bc + j] = 0.f;
    if (pack_v) std::fill(sc.v.data() + j * Dvp, sc.v.data() + (j + 1) * Dvp, 0.f);
  }
}

// True when this target can run the bf16 pair products (AMX tiles or vdpbf16ps, both behind the avx512_bf16
// target) and the plan asked for them.
constexpr bool kHasBf16Tiles = HWY_TARGET == HWY_AVX3;
constexpr bool kWideTiles = HWY_MAX_BYTES >= 64;

void RunPrefillTask(const AttentionProblem& p, const PrefillPlan& plan, const PackedKeyValues* packed,
                    int64_t task_index) {
  static thread_local Scratch sc;
  const PrefillTask& t = plan.tasks[size_t(task_index)];
  const SeqSpan& seq = p.seqs[size_t(t.seq)];
  const bool bf16 = kHasBf16Tiles && plan.bf16_dot;
  const size_t Br = size_t(plan.block_q), Bc = size_t(plan.block_k);
  const size_t D = size_t(p.D), Dv = size_t(p.Dv), D2 = (D + 1) / 2;
  const size_t Dvp = size_t(plan.dv_padded);
  const int64_t G = p.group();
  const int64_t rows = std::min<int64_t>(plan.block_q, seq.Tq - t.q_begin);
  const int64_t offset = seq.Tk - seq.Tq;  // bottom-right alignment: query i sits at key position i + offset
  // Contiguous f32 V rows sit at one stride (vs.token): O += P V reads them where they are instead of a tile's
  // copy. Not on 256-bit targets when rows are a multiple of 4 KiB apart (Hkv * D * 4 bytes at Hkv=8, D=128):
  // their column panel is one 64-byte line of each row and all those lines share one L1 set (12% slower at
  // T=4096 on AVX2; 1 KiB apart it gains 3-5%; 512-bit panels read 4 lines a row and gain either way).
  const bool v_in_place = !bf16 && p.kv_dtype == DType::f32 && !p.v_scale.data && !seq.blocks && Dvp == Dv &&
                          (kWideTiles || p.vs.token * int64_t(sizeof(float)) % 4096 != 0);

  sc.s.resize(Br * Bc);
  sc.o.resize(size_t(G) * Br * Dvp);
  sc.m.resize(size_t(G) * Br);
  sc.l.resize(size_t(G) * Br);
  sc.row.resize(std::max(D, Dvp));
  sc.krow.resize(Bc);
  sc.vrow.resize(Bc);
  if (bf16) {
    sc.q2.resize(size_t(G) * Br * D2);
    sc.p2.resize(Br * Bc / 2);
  } else {
    sc.q.resize(size_t(G) * Br * D);
    sc.kt.resize(D * Bc);
    sc.v.resize(Bc * Dvp);
  }

  // Queries for every head of the group; the f32 path folds the softmax scale in here, the bf16 path keeps the
  // inputs exact and scales the scores instead.
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = t.kv_head * G + g;
    for (int64_t i = 0; i < rows; ++i) {
      const char* src = ElementPtr(p.q, p.q_dtype, seq.q_offset + (t.q_begin + i) * p.qs.token + h * p.qs.head);
      const size_t row = size_t(g) * Br + size_t(i);
      if (bf16) {
        PackPairs(reinterpret_cast<const uint16_t*>(src), D, sc.q2.data() + row * D2);
      } else {
        float* dst = sc.q.data() + row * D;
        convert_to_f32(src, p.q_dtype, dst, D);
        for (size_t d = 0; d < D; ++d) dst[d] *= p.scale;
      }
    }
  }
  std::fill(sc.o.data(), sc.o.data() + size_t(G) * Br * Dvp, 0.f);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = t.kv_head * G + g;
    for (size_t i = 0; i < Br; ++i) {
      sc.m[size_t(g) * Br + i] = p.opts.sinks ? p.opts.sinks[h] : -INFINITY;
      sc.l[size_t(g) * Br + i] = p.opts.sinks ? 1.f : 0.f;  // the sink's own exp(sink - m) at m = sink
    }
  }

  const MaskGeometry mask = mask_geometry(p.opts);
  const int64_t q_first = t.q_begin + offset, q_last = t.q_begin + rows - 1 + offset;
  const KeyRange range = visible_key_range(mask, q_first, q_last, seq.Tk, plan.block_k);
  for (int64_t k0 = range.begin; k0 < range.end; k0 += plan.block_k) {
    const int64_t cols = std::min<int64_t>(plan.block_k, seq.Tk - k0);
    const TileClass cls = classify_tile(mask, q_first, q_last, k0, k0 + cols - 1);
    if (cls == TileClass::skipped) continue;
    const uint32_t *kt2 = nullptr, *v2 = nullptr;
    if (bf16) {
      kt2 = packed->key_tile(t.seq, t.kv_head, k0 / plan.block_k);
      v2 = packed->value_tile(t.seq, t.kv_head, k0 / plan.block_k);
    } else {
      ResolveTileRows(p, seq, k0, cols, sc);
      if (p.k_scale.data) ResolveTileScales(p, seq, k0, cols, sc);
      PackKeyValueTile(p, t.kv_head, cols, Bc, Dvp, !v_in_place, sc);
    }
    const float* v0 = v_in_place ? static_cast<const float*>(p.v) + sc.vrow[0] + t.kv_head * p.vs.head : nullptr;
    // A partly visible tile whose values hold a NaN or Inf multiplies its visible pairs alone
    // (prefill_hidden_values-inl.h): f32 rows of its values, ldv apart.
    const float* exact_v = nullptr;
    size_t ldv = Dvp;
    if (cls == TileClass::partial) {
      if (bf16 && !PairsFinite(v2, Bc / 2 * Dvp)) {
        sc.v.resize(Bc * Dvp);
        UnpackValuePairs(v2, Bc, Dvp, sc.v.data());
        exact_v = sc.v.data();
      } else if (v_in_place && !RowsFinite(v0, size_t(cols), Dvp, size_t(p.vs.token))) {
        exact_v = v0;
        ldv = size_t(p.vs.token);
      } else if (!bf16 && !v_in_place && !RowsFinite(sc.v.data(), 1, size_t(cols) * Dvp, 0)) {
        exact_v = sc.v.data();
      }
    }
    const int64_t next = k0 + plan.block_k, next_cols = std::min<int64_t>(plan.block_k, range.end - next);
    for (int64_t g = 0; g < G; ++g) {
      const int64_t h = t.kv_head * G + g;
      float* og = sc.o.data() + size_t(g) * Br * Dvp;
      if (!bf16 && next_cols > 0 && !seq.blocks)  // spread over the heads: a few hundred lines at a time
        PrefetchKeyRows(p, seq, t.kv_head, next + next_cols * g / G, next + next_cols * (g + 1) / G);
      if (bf16) {
        bf16_pair_gemm(size_t(rows), Bc, D2, sc.q2.data() + size_t(g) * Br * D2, D2, kt2, Bc,
                       sc.s.data(), Bc, /*accumulate=*/false);
      } else {
        TileGemm(size_t(rows), Bc, D, sc.q.data() + size_t(g) * Br * D, D, sc.kt.data(), Bc, sc.s.data(), Bc,
                 /*accumulate=*/false);
      }
      TileRowContext ctx{bf16 ? p.scale : 1.f, p.opts.softcap, p.opts.alibi_slopes ? p.opts.alibi_slopes[h] : 0.f,
                         cls == TileClass::partial, &mask, 0, k0};
      for (int64_t i = 0; i < rows; ++i) {
        ctx.qpos = q_first + i;
        float* srow = sc.s.data() + size_t(i) * Bc;
        float* mi = &sc.m[size_t(g) * Br + size_t(i)];
        float* li = &sc.l[size_t(g) * Br + size_t(i)];
        const float alpha = bf16 ? SoftmaxRowBf16(srow, Bc, size_t(cols), ctx, mi, li)
                                 : SoftmaxRow(srow, Bc, size_t(cols), ctx, mi, li);
        if (alpha != 1.f) ScaleRow(og + size_t(i) * Dvp, Dvp, alpha);
        if (bf16 && !exact_v) pack_f32_to_bf16_pairs(srow, Bc, sc.p2.data() + size_t(i) * (Bc / 2));
      }
      if (exact_v) {
        MaskedValueProduct(size_t(rows), size_t(cols), sc.s.data(), Bc, exact_v, ldv, Dvp, mask, q_first, k0, og,
                           Dvp);
      } else if (bf16) {
        bf16_pair_gemm(size_t(rows), Dvp, Bc / 2, sc.p2.data(), Bc / 2, v2, Dvp, og, Dvp,
                       /*accumulate=*/true);
      } else if (v_in_place) {  // only the tile's `cols` keys: rows past the sequence are not there to read
        TileGemm(size_t(rows), Dvp, size_t(cols), sc.s.data(), Bc, v0, size_t(p.vs.token), og, Dvp,
                 /*accumulate=*/true);
      } else {
        TileGemm(size_t(rows), Dvp, Bc, sc.s.data(), Bc, sc.v.data(), Dvp, og, Dvp, /*accumulate=*/true);
      }
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
  const bool bf16_tiles = bf16_tiles_enabled() && p.q_dtype == DType::bf16 && p.kv_dtype == DType::bf16;
  const PrefillPlan plan = make_prefill_plan(p, bf16_tiles);
  std::optional<PackedKeyValues> packed;
  if (bf16_tiles) packed.emplace(p, plan.block_k, plan.dv_padded);
  ThreadPool::global().parallel_for(int64_t(plan.tasks.size()), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunPrefillTask)(p, plan, packed ? &*packed : nullptr, task);
  });
}

}  // namespace attnzoo
#endif
