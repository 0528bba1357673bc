// MLA's per-token rows on the GPU runner (models/cuda/mla_rows_plan.h): every batch shape one absorbed-decode call.
#include "models/cuda/mla_rows_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/mla.h"
#include "layers/head_rows.h"
#include "models/cuda/mla_step_views.h"

namespace attnzoo {
namespace {

// A ragged batch over a paged latent cache: sequence s brings len[s] new tokens after context[s] cached ones and
// owns M blocks of the pool, handed out in a shuffled order (each sequence's blocks scattered over the pool).
struct PagedBatch {
  std::vector<int32_t> cu{0}, cache_seqlens, tables;
  int64_t S, T, num_blocks;

  PagedBatch(const std::vector<int32_t>& len, const std::vector<int32_t>& context, int64_t M, std::mt19937& rng) {
    for (size_t s = 0; s < len.size(); ++s) {
      cu.push_back(cu.back() + len[s]);
      cache_seqlens.push_back(context[s] + len[s]);
    }
    S = int64_t(len.size()), T = cu.back(), num_blocks = S * M;
    tables.resize(size_t(num_blocks));
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), rng);
  }
};

TEST(MlaRowsPlan, EachNewTokenSeesTheKeysUpToItself) {
  // A fresh prefill of 3, a decode step after 10 cached, a chunk of 2 after 4 cached, an empty sequence.
  const std::vector<int32_t> cu = {0, 3, 4, 6, 6}, cache = {3, 11, 6, 5};
  const int64_t M = 2;
  const std::vector<int32_t> tables = {7, -1, 1, 2, 3, 4, 5, 6};
  const MlaRowsPlan plan = plan_mla_rows(cu, cache, tables, M);
  EXPECT_EQ(plan.max_blocks, M);
  EXPECT_EQ(plan.cache_seqlens, (std::vector<int32_t>{1, 2, 3, 11, 5, 6}));
  EXPECT_EQ(plan.block_table, (std::vector<int32_t>{7, -1, 7, -1, 7, -1, 1, 2, 3, 4, 3, 4}));
}

TEST(MlaRowsPlan, InconsistentArraysAreRefusedByName) {
  const std::vector<int32_t> tables = {0, 1};
  auto refusal = [&](std::vector<int32_t> cu, std::vector<int32_t> cache, int64_t max_blocks) -> std::string {
    try {
      plan_mla_rows(cu, cache, tables, max_blocks);
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal({0, 2, 3}, {2}, 2).find("cu_seqlens"), std::string::npos);
  EXPECT_NE(refusal({0, 3}, {2}, 2).find("cache_seqlens"), std::string::npos);
  EXPECT_NE(refusal({0, 1}, {1}, 3).find("block_tables"), std::string::npos);
  EXPECT_EQ(refusal({0, 2}, {5}, 2), "");
}

TEST(MlaRowsPlan, CallsAreBoundedByTheirScratch) {
  // DeepSeek-V3: 128 heads x (2 x 512 + 64) f32 per row, 544 KiB: 240 rows in 128 MiB.
  EXPECT_EQ(mla_rows_per_call(128, 512, 64), 240);
  EXPECT_EQ(mla_rows_per_call(4, 64, 32), kMlaScratchBytes / (4 * 160 * 4));
  EXPECT_EQ(mla_rows_per_call(1 << 20, 512, 64), 1);  // never none
}

// The decomposition itself: per-token rows through the absorbed form give what the CPU mixer computes per sequence
// (the naive form over the same paged cache, queries bottom-right aligned), on a batch of every shape.
TEST(MlaRowsPlan, PerTokenRowsMatchTheNaiveFormPerSequence) {
  const int64_t H = 3, dn = 8, dr = 4, dv = 6, r = 10, L = r + dr, Dq = dn + dr, bs = 4, M = 6;
  const std::vector<int32_t> len = {5, 1, 3, 9}, context = {0, 12, 4, 7};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  const auto [cu, cache_seqlens, tables, S, T, num_blocks] = PagedBatch(len, context, M, rng);
  std::vector<float> latent(size_t(num_blocks * bs * L)), q(size_t(T * H * Dq)), w(size_t(H * (dn + dv) * r));
  for (auto* v : {&latent, &q, &w})
    for (float& x : *v) x = normal(rng);
  MlaWeights mw;
  mw.w_kv_b = TensorView::contiguous(w.data(), DType::f32, {H * (dn + dv), r});
  mw.num_heads = H, mw.qk_nope_head_dim = dn, mw.qk_rope_head_dim = dr, mw.v_head_dim = dv, mw.kv_lora_rank = r;
  const TensorView paged = TensorView::contiguous(latent.data(), DType::f32, {num_blocks, bs, L});
  const MlaOptions opts;

  std::vector<float> want(size_t(T * H * dv)), got(want.size());
  LatentCacheView seqs;
  seqs.latent = paged;
  seqs.cache_seqlens = cache_seqlens.data();
  seqs.block_table = tables.data();
  seqs.max_blocks_per_seq = M;
  VarlenInfo varlen;
  varlen.cu_seqlens_q = cu.data();
  varlen.num_seqs = S;
  mla_prefill_reference(TensorView::contiguous(q.data(), DType::f32, {T, H, Dq}), seqs, mw,
                        TensorView::contiguous(want.data(), DType::f32, {T, H, dv}), opts, varlen);

  const MlaRowsPlan plan = plan_mla_rows(cu, cache_seqlens, tables, M);
  LatentCacheView rows = seqs;
  rows.cache_seqlens = plan.cache_seqlens.data();
  rows.block_table = plan.block_table.data();
  mla_decode_reference(TensorView::contiguous(q.data(), DType::f32, {T, 1, H, Dq}), rows, mw,
                       TensorView::contiguous(got.data(), DType::f32, {T, 1, H, dv}), opts);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

TEST(MlaStepPlan, PrefillSequencesExpandDecodeRowsStayAbsorbed) {
  // A decode after 10 cached, a fresh prefill of 3, a chunk of 2 after 4 cached, an empty sequence, a decode.
  const std::vector<int32_t> cu = {0, 1, 4, 6, 6, 7}, cache = {11, 3, 6, 5, 2};
  const int64_t M = 3, bs = 4;
  const std::vector<int32_t> tables = {0, 1, 2, 7, -1, -1, 5, 3, -1, 6, 4, -1, 8, -1, -1};
  MlaExpandSizes sizes;
  sizes.num_heads = 2, sizes.head_dim = 64, sizes.latent_bytes = 4, sizes.head_key_bytes = 3;
  sizes.head_query_bytes = 1;
  const MlaStepPlan plan = plan_mla_step(cu, cache, tables, M, bs, sizes, /*min_rows=*/2);
  EXPECT_EQ(plan.rows.cache_seqlens, plan_mla_rows(cu, cache, tables, M).cache_seqlens);
  EXPECT_EQ(plan.absorbed_runs, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {6, 1}}));
  ASSERT_EQ(plan.groups.size(), 1u);
  const MlaExpandGroup& g = plan.groups[0];
  EXPECT_EQ(g.heads, 2);
  EXPECT_EQ(g.q_rows, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  // Block 7's first three slots; then blocks 5 and 3, six keys (four cached, the chunk's two).
  EXPECT_EQ(g.key_slots, (std::vector<int32_t>{28, 29, 30, 20, 21, 22, 23, 12, 13}));
  EXPECT_EQ(g.cu_seqlens_q, (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(g.cu_seqlens_k, (std::vector<int32_t>{0, 3, 9}));

  // Every row absorbed: no head dim the prefill takes, or a threshold above every sequence (the default: up to
  // kMaxDecodeQueries new tokens are decode rows, a verify step's).
  EXPECT_EQ(kMlaExpandMinRows, 9);
  for (const MlaStepPlan& p : {plan_mla_step(cu, cache, tables, M, bs, MlaExpandSizes{}, 2),
                               plan_mla_step(cu, cache, tables, M, bs, sizes, /*min_rows=*/4),
                               plan_mla_step(cu, cache, tables, M, bs, sizes)}) {
    EXPECT_TRUE(p.groups.empty());
    EXPECT_EQ(p.absorbed_runs, (std::vector<std::pair<int64_t, int64_t>>{{0, 7}}));
  }
}

TEST(MlaStepPlan, ScratchBudgetSplitsGroupsThenHeads) {
  // Three prefills of 2 tokens after 0, 6 and 1 cached, 4 heads; per key 2 bytes of latent and 2 per head, per
  // query 1 per head: 2 * 2 + 4 * (2 * 2 + 2) = 28, 8 * 2 + 4 * (8 * 2 + 2) = 88 and 3 * 2 + 4 * (3 * 2 + 2) = 38.
  const std::vector<int32_t> cu = {0, 2, 4, 6}, cache = {2, 8, 3};
  const std::vector<int32_t> tables = {0, -1, 1, 2, 3, -1};
  MlaExpandSizes sizes;
  sizes.num_heads = 4, sizes.head_dim = 128, sizes.latent_bytes = 2, sizes.head_key_bytes = 2;
  sizes.head_query_bytes = 1;
  EXPECT_EQ(sizes.bytes(2, 2, 4), 4 + 4 * 6);
  const MlaStepPlan fits = plan_mla_step(cu, cache, tables, 2, 4, sizes, 2, /*budget=*/160);
  ASSERT_EQ(fits.groups.size(), 1u);
  EXPECT_EQ(fits.groups[0].heads, 4);
  EXPECT_TRUE(fits.absorbed_runs.empty());
  const MlaStepPlan split = plan_mla_step(cu, cache, tables, 2, 4, sizes, 2, /*budget=*/130);
  ASSERT_EQ(split.groups.size(), 2u);
  EXPECT_EQ(split.groups[0].q_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(split.groups[1].q_rows, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(split.groups[1].cu_seqlens_k, (std::vector<int32_t>{0, 3}));
  // 84 bytes: sequence 1 alone in slices of (84 - 16) / 18 = 3 heads, and no other sequence joins its group.
  const MlaStepPlan sliced = plan_mla_step(cu, cache, tables, 2, 4, sizes, 2, /*budget=*/84);
  ASSERT_EQ(sliced.groups.size(), 3u);
  EXPECT_EQ(sliced.groups[0].heads, 4);
  EXPECT_EQ(sliced.groups[1].heads, 3);
  EXPECT_EQ(sliced.groups[1].q_rows, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(sliced.groups[2].heads, 4);
  EXPECT_TRUE(sliced.absorbed_runs.empty());
  // 30 bytes: sequence 1 cannot fit even one head's (16 + 18 = 34) and stays absorbed; the third runs alone in
  // slices of (30 - 6) / 8 = 3 heads.
  const MlaStepPlan none = plan_mla_step(cu, cache, tables, 2, 4, sizes, 2, /*budget=*/30);
  EXPECT_EQ(none.absorbed_runs, (std::vector<std::pair<int64_t, int64_t>>{{2, 2}}));
  ASSERT_EQ(none.groups.size(), 2u);
  EXPECT_EQ(none.groups[0].q_rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(none.groups[0].heads, 4);
  EXPECT_EQ(none.groups[1].heads, 3);

  const std::vector<int32_t> short_table = {0, -1, 1, -1, 3, -1};  // sequence 1's 8 keys need two blocks
  EXPECT_THROW(plan_mla_step(cu, cache, short_table, 2, 4, sizes, 2, 1000), ArgumentError);
}

TEST(MlaStepPlan, ExpandSizesPadToThePrefillsHeadDims) {
  const MlaExpandSizes v3 = mla_expand_sizes(128, 512, 128, 64, 128, 2);  // DeepSeek-V3: 192 / 128 -> 256
  EXPECT_EQ(v3.head_dim, 256);
  EXPECT_EQ(v3.bytes(1, 0, 128), 2 * (576 + 128 * 256 + 2 * 128 * 256));  // a key over every head
  EXPECT_EQ(v3.bytes(0, 1, 128), 2 * 2 * 128 * 256);                      // a query
  EXPECT_EQ(kMlaExpandBytes / v3.bytes(1, 0, 128), 5429);  // the longest context one call expands over all heads
  EXPECT_EQ(kMlaExpandBytes / v3.bytes(1, 0, 16), 41734);  // over 16 at a time
  EXPECT_EQ(kMlaExpandBytes / v3.bytes(1, 0, 1), 399457);  // one
  EXPECT_EQ(mla_expand_sizes(4, 64, 32, 32, 32, 2).head_dim, 64);  // the GPU test's tiny shapes
  EXPECT_EQ(mla_expand_sizes(4, 64, 64, 32, 32, 2).head_dim, 128);
  EXPECT_EQ(mla_expand_sizes(4, 64, 256, 64, 128, 2).head_dim, 0);  // wider than 256: absorbed
}

// The expanded path itself, over mla_expand_views' tensors (device_mla.cc's) on host memory, through the CPU twins
// of its steps in device_mla.cc's order (gather the keys' latent rows, c_kv through kv_b_proj rounded to bf16 as the
// GEMM stores it, pad K / V / Q, the softmax prefill at the padded dim with MLA's scale, the output sliced back)
// with the absorbed rows for the rest, against the naive form per sequence: every row covered once, within bf16
// rounding.
TEST(MlaStepPlan, ExpandedAndAbsorbedRowsMatchTheNaiveForm) {
  const int64_t H = 3, dn = 24, dr = 16, dv = 20, r = 32, L = r + dr, Dq = dn + dr, bs = 4, M = 6;
  const std::vector<int32_t> len = {5, 1, 3, 9, 0}, context = {0, 12, 4, 7, 3};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  const auto [cu, cache_seqlens, tables, S, T, num_blocks] = PagedBatch(len, context, M, rng);
  auto bf16 = [&](int64_t n, float scale) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) store_from_f32(v.data(), DType::bf16, i, scale * normal(rng));
    return v;
  };
  std::vector<uint16_t> latent = bf16(num_blocks * bs * L, 1.f), q = bf16(T * H * Dq, 1.f);
  std::vector<uint16_t> w = bf16(H * (dn + dv) * r, 0.2f);
  MlaWeights mw;
  mw.w_kv_b = TensorView::contiguous(w.data(), DType::bf16, {H * (dn + dv), r});
  mw.num_heads = H, mw.qk_nope_head_dim = dn, mw.qk_rope_head_dim = dr, mw.v_head_dim = dv, mw.kv_lora_rank = r;
  MlaOptions mla_opts;  // NaN scale: (dn + dr)^-0.5
  LatentCacheView seqs;
  seqs.latent = TensorView::contiguous(latent.data(), DType::bf16, {num_blocks, bs, 1, L});
  seqs.cache_seqlens = cache_seqlens.data();
  seqs.block_table = tables.data();
  seqs.max_blocks_per_seq = M;
  std::vector<float> want(size_t(T * H * dv));
  mla_prefill_reference(TensorView::contiguous(q.data(), DType::bf16, {T, H, Dq}), seqs, mw,
                        TensorView::contiguous(want.data(), DType::f32, {T, H, dv}), mla_opts,
                        VarlenInfo{cu.data(), nullptr, S});

  const MlaExpandSizes sizes = mla_expand_sizes(H, r, dn, dr, dv, 2);
  ASSERT_EQ(sizes.head_dim, 64);
  // Sequences 0 and 2 in one call over all heads; sequence 3 (16 keys) past the budget in slices of 2 heads, then 1;
  // sequence 1 (a decode) absorbed.
  const MlaStepPlan plan = plan_mla_step(cu, cache_seqlens, tables, M, bs, sizes, /*min_rows=*/2, /*budget=*/20000);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].heads, H);
  EXPECT_EQ(plan.groups[1].heads, 2);
  EXPECT_EQ(plan.absorbed_runs, (std::vector<std::pair<int64_t, int64_t>>{{5, 1}}));
  std::vector<uint16_t> got(size_t(T * H * dv), 0xFFFF);  // NaN where nothing wrote
  MlaConfig c;
  c.num_heads = H, c.kv_lora_rank = r, c.qk_nope_head_dim = dn, c.qk_rope_head_dim = dr, c.v_head_dim = dv;
  std::vector<uint16_t> step_latent(size_t(T * L));  // the step's own latent rows: not read here
  const MlaStepViews step = mla_step_views(c, Device::cpu(), DType::bf16, T, q.data(), step_latent.data(), got.data());
  const int64_t D = sizes.head_dim;
  for (const MlaExpandGroup& g : plan.groups) {
    const int64_t n = int64_t(g.q_rows.size()), N = int64_t(g.key_slots.size());
    const MlaExpandBytes bytes = mla_expand_bytes(c, DType::bf16, D, N, n, g.heads);
    EXPECT_LE(int64_t(bytes.latent_kv + bytes.k_v + bytes.q_o), sizes.bytes(N, n, g.heads) + 6 * 256);
    std::vector<uint8_t> latent_kv(bytes.latent_kv), k_v(bytes.k_v), q_o(bytes.q_o);
    for (int64_t h0 = 0; h0 < H; h0 += g.heads) {
      const int64_t heads = std::min(g.heads, H - h0);
      const MlaExpandViews x = mla_expand_views(c, seqs.latent, step, mw.w_kv_b, D, N, n, h0, heads, latent_kv.data(),
                                                k_v.data(), q_o.data());
      if (h0 == 0) copy_head_rows({x.pool_rows, x.keys_latent, g.key_slots.data(), nullptr, N});
      for (int64_t j = 0; j < N; ++j)
        for (int64_t o = 0; o < x.w.size(0); ++o) {
          float acc = 0.f;
          for (int64_t i = 0; i < r; ++i)
            acc += load_as_f32(x.c_kv.data, DType::bf16, j * x.c_kv.stride(0) + i) *
                   load_as_f32(x.w.data, DType::bf16, o * r + i);
          store_from_f32(x.kv.data, DType::bf16, j * x.kv.stride(0) + o, acc);
        }
      copy_head_rows({x.kv_nope, x.k_nope, nullptr, nullptr, N});
      copy_head_rows({x.k_pe, x.k_rope, nullptr, nullptr, N});
      copy_head_rows({x.kv_v, x.v, nullptr, nullptr, N});
      copy_head_rows({x.step_q, x.q, g.q_rows.data(), nullptr, n});
      AttentionOptions opts;
      opts.scale = 1.f / std::sqrt(float(Dq));
      attention_prefill(x.q, x.k, x.v, x.o, opts,
                        VarlenInfo{g.cu_seqlens_q.data(), g.cu_seqlens_k.data(), int64_t(g.cu_seqlens_q.size()) - 1});
      copy_head_rows({x.o_v, x.step_out, nullptr, g.q_rows.data(), n});
    }
  }
  for (const auto& [first, rows] : plan.absorbed_runs) {
    LatentCacheView part = seqs;
    part.cache_seqlens = plan.rows.cache_seqlens.data() + first;
    part.block_table = plan.rows.block_table.data() + first * M;
    std::vector<float> o(size_t(rows * H * dv));
    mla_decode_reference(TensorView::contiguous(q.data() + first * H * Dq, DType::bf16, {rows, 1, H, Dq}), part, mw,
                         TensorView::contiguous(o.data(), DType::f32, {rows, 1, H, dv}), mla_opts);
    for (size_t i = 0; i < o.size(); ++i) store_from_f32(got.data(), DType::bf16, first * H * dv + int64_t(i), o[i]);
  }
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(load_as_f32(got.data(), DType::bf16, int64_t(i)), want[i], 2e-2 * (1 + std::fabs(want[i]))) << i;
}

}  // namespace
}  // namespace attnzoo
