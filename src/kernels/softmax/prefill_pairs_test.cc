// PackedKeyValues against its definition: K^T pairs along d and V pairs along keys, tile by tile, zero past the
// sequence and past the head dim, for packed (varlen) keys and for a paged cache read through its block table.
#include <gtest/gtest.h>

#include "core/bf16_dot.h"
#include "kernels/softmax/prefill_pairs.h"
#include "kernels/softmax/problem.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

constexpr int64_t kBlockK = 32;

uint16_t element(const void* base, int64_t row, int64_t head_stride, int64_t kv_head,
                 int64_t d, int64_t dim) {
  if (d >= dim) return 0;
  return static_cast<const uint16_t*>(base)[row + kv_head * head_stride + d];
}

void expect_packed(const AttentionProblem& p) {
  if (!bf16_dot_available()) GTEST_SKIP() << "the packing transposes with AVX-512 (bf16 tiles only run there)";
  const int64_t D2 = (p.D + 1) / 2, Dvp = (p.Dv + 15) / 16 * 16;
  const PackedKeyValues packed(p, kBlockK, Dvp);
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const SeqSpan& seq = p.seqs[s];
    for (int64_t h = 0; h < p.Hkv; ++h)
      for (int64_t t = packed.first_packed_tile(int64_t(s)); t < packed.end_packed_tile(int64_t(s)); ++t) {
        const uint32_t* kt = packed.key_tile(int64_t(s), h, t);
        const uint32_t* vp = packed.value_tile(int64_t(s), h, t);
        for (int64_t j = 0; j < kBlockK; ++j) {
          const int64_t key = t * kBlockK + j;
          for (int64_t dd = 0; dd < D2; ++dd) {
            uint32_t want = 0;
            if (key < seq.Tk) {
              const int64_t row = p.k_row(seq, key);
              want = element(p.k, row, p.ks.head, h, 2 * dd, p.D) |
                     uint32_t(element(p.k, row, p.ks.head, h, 2 * dd + 1, p.D)) << 16;
            }
            ASSERT_EQ(kt[dd * kBlockK + j], want) << "K seq " << s << " head " << h << " key " << key << " pair " << dd;
          }
        }
        for (int64_t jj = 0; jj < kBlockK / 2; ++jj)
          for (int64_t d = 0; d < Dvp; ++d) {
            uint32_t want = 0;
            for (int64_t half = 0; half < 2; ++half) {
              const int64_t key = t * kBlockK + 2 * jj + half;
              if (key < seq.Tk) want |= uint32_t(element(p.v, p.v_row(seq, key), p.vs.head, h, d, p.Dv)) << (16 * half);
            }
            ASSERT_EQ(vp[jj * Dvp + d], want) << "V seq " << s << " head " << h << " pair row " << jj << " d " << d;
          }
      }
  }
}

TEST(PrefillPairs, PackedKeysMatchTheDefinition) {
  const std::vector<int32_t> cu = {0, 5, 37, 100};
  for (int64_t D : {61, 64, 96}) {  // odd D: the last pair's high half is zero
    HostTensor q(DType::bf16, {cu.back(), 4, D}, 1), k(DType::bf16, {cu.back(), 2, D}, 2),
        v(DType::bf16, {cu.back(), 2, D}, 3), out(DType::bf16, {cu.back(), 4, D}, 0, 0.f);
    expect_packed(make_prefill_problem(q.view, k.view, v.view, out.view, {}, {cu.data(), nullptr, 3}));
  }
}

// A window over a long cache: only the tiles its queries may see, from the first query's window on.
TEST(PrefillPairs, WindowPacksOnlyVisibleTiles) {
  const int64_t Tq = 10, Tk = 300, D = 64;
  HostTensor q(DType::bf16, {1, Tq, 2, D}, 1), k(DType::bf16, {1, Tk, 1, D}, 2), v(DType::bf16, {1, Tk, 1, D}, 3);
  HostTensor out(DType::bf16, {1, Tq, 2, D}, 0, 0.f);
  AttentionOptions opts;
  opts.window = 40;  // queries at 290..299 see keys 251..299: tiles 7, 8, 9 of 32
  const AttentionProblem p = make_prefill_problem(q.view, k.view, v.view, out.view, opts, {});
  if (!bf16_dot_available()) GTEST_SKIP() << "the packing transposes with AVX-512";
  const PackedKeyValues packed(p, kBlockK, D);
  EXPECT_EQ(packed.first_packed_tile(0), 7);
  EXPECT_EQ(packed.end_packed_tile(0), 10);
  expect_packed(p);
}

TEST(PrefillPairs, PagedCacheReadThroughTheBlockTable) {
  const int64_t B = 2, S_max = 90, bs = 16, D = 64, max_blocks = (S_max + bs - 1) / bs, num_blocks = B * max_blocks + 2;
  HostTensor k(DType::bf16, {B, S_max, 2, D}, 4), v(DType::bf16, {B, S_max, 2, D}, 5);
  const std::vector<int32_t> table = testing::shuffled_block_table(B, max_blocks, num_blocks, 9);
  HostTensor kp = testing::to_paged(k, table, max_blocks, bs, num_blocks);
  HostTensor vp = testing::to_paged(v, table, max_blocks, bs, num_blocks);
  const std::vector<int32_t> lens = {70, 90};
  HostTensor q(DType::bf16, {B, 3, 4, D}, 6), out(DType::bf16, {B, 3, 4, D}, 0, 0.f);
  const KvCacheView cache{kp.view, vp.view, lens.data(), table.data(), max_blocks};
  expect_packed(make_cached_prefill_problem(q.view, cache, out.view, {}, {}));
}

}  // namespace
}  // namespace attnzoo
