// MLA's per-token rows on the GPU runner (models/cuda/mla_rows_plan.h): every batch shape one absorbed-decode call.
#include "models/cuda/mla_rows_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "kernels/softmax/mla.h"

namespace attnzoo {
namespace {

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
  std::vector<int32_t> cu = {0}, cache_seqlens;
  for (size_t s = 0; s < len.size(); ++s) {
    cu.push_back(cu.back() + len[s]);
    cache_seqlens.push_back(context[s] + len[s]);
  }
  const int64_t S = int64_t(len.size()), T = cu.back(), num_blocks = S * M;
  std::vector<int32_t> tables(static_cast<size_t>(num_blocks));
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);  // each sequence's blocks scattered over the pool
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

}  // namespace
}  // namespace attnzoo
