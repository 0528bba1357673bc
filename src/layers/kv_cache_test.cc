#include "layers/kv_cache.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

TEST(KvCache, AppendsAcrossGrowthAndKeepsTokensContiguous) {
  const int64_t H = 2, D = 3, W = H * D;
  KvCache cache(H, D, /*block_tokens=*/4);
  std::vector<float> k, v;
  int64_t total = 0;
  for (int64_t n : {1, 3, 5, 1, 9}) {
    std::vector<float> kb(size_t(n * (W + 1))), vb(size_t(n * (W + 1)));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < W; ++i) {
        kb[size_t(t * (W + 1) + i)] = float((total + t) * 100 + i);
        vb[size_t(t * (W + 1) + i)] = -float((total + t) * 100 + i);
      }
    cache.append(kb.data(), vb.data(), n, W + 1);  // strided source
    total += n;
    EXPECT_EQ(cache.length(), total);
    EXPECT_EQ(cache.capacity() % 4, 0);
  }
  const TensorView keys = cache.keys(), values = cache.values();
  EXPECT_EQ(keys.shape[1], total);
  for (int64_t t = 0; t < total; ++t)
    for (int64_t i = 0; i < W; ++i) {
      ASSERT_EQ(keys.ptr<float>()[t * W + i], float(t * 100 + i));
      ASSERT_EQ(values.ptr<float>()[t * W + i], -float(t * 100 + i));
    }
  const KvCacheView dv = cache.decode_view();
  EXPECT_EQ(*dv.cache_seqlens, total);
  EXPECT_EQ(dv.k.shape[1], cache.capacity());
  cache.truncate(5);
  EXPECT_EQ(*dv.cache_seqlens, 5);
  EXPECT_THROW(cache.truncate(6), ArgumentError);
}

TEST(KvCache, SlidingWindowKeepsTheLastWindowTokens) {
  const int64_t W = 2;  // 1 head x 2
  KvCache cache(1, 2, /*block_tokens=*/4, /*window=*/3);
  int64_t total = 0;
  for (int step = 0; step < 20; ++step) {
    const int64_t n = step % 3 + 1;
    std::vector<float> kb(size_t(n * W));
    for (int64_t t = 0; t < n; ++t) kb[size_t(t * W)] = kb[size_t(t * W + 1)] = float(total + t);
    cache.append(kb.data(), kb.data(), n, W);
    total += n;
    EXPECT_EQ(cache.length(), total);
    // At most window + block before the append, plus the appended chunk.
    EXPECT_LE(cache.stored(), 3 + 4 + n);
    EXPECT_GE(cache.stored(), std::min<int64_t>(total, 3 + n));
    // The stored tokens are the newest ones, in order.
    const float* k = cache.keys().ptr<float>();
    for (int64_t t = 0; t < cache.stored(); ++t) ASSERT_EQ(k[t * W], float(total - cache.stored() + t));
  }
  EXPECT_THROW(cache.truncate(total - cache.stored() - 1), ArgumentError);
  cache.truncate(total - 1);
  EXPECT_EQ(cache.length(), total - 1);
  EXPECT_EQ(KvCache::spec(1, 2, 4, 3).max_tokens, 7);
}

TEST(CacheSpec, BytesForRoundsToBlocksAndHonoursAWindow) {
  const CacheSpec s = KvCache::spec(8, 128, 256);
  EXPECT_EQ(s.bytes_per_token, 2 * 8 * 128 * 4);
  EXPECT_EQ(s.bytes_for(0), 0);
  EXPECT_EQ(s.bytes_for(1), 256 * s.bytes_per_token);
  EXPECT_EQ(s.bytes_for(4096), 4096 * s.bytes_per_token);
  CacheSpec ring = s;
  ring.max_tokens = 512;
  ring.fixed_bytes = 10;
  EXPECT_EQ(ring.bytes_for(1 << 20), 10 + 512 * s.bytes_per_token);
}

}  // namespace
}  // namespace attnzoo
