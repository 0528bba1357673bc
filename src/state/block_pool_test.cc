#include "state/block_pool.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "state/memory_pool.h"

namespace attnzoo {
namespace {

TEST(BlockPool, ReferenceCountsFreeAndEvictCachedBlocksLeastRecentlyUsedFirst) {
  BlockPool pool(3);
  const int32_t a = *pool.allocate(), b = *pool.allocate(), c = *pool.allocate();
  EXPECT_EQ(std::set<int32_t>({a, b, c}).size(), 3u);
  EXPECT_FALSE(pool.allocate().has_value());
  const std::vector<int32_t> t1 = {1, 2}, t2 = {3, 4};
  const BlockKey k1 = make_block_key(0, t1), k2 = make_block_key(k1.hash, t2);
  pool.register_block(a, k1);
  pool.register_block(b, k2);
  pool.retain(a);
  pool.release(a);
  EXPECT_EQ(pool.ref_count(a), 1);
  pool.release(a);  // cached, unreferenced: evictable, first in line
  pool.release(b);
  pool.release(c);  // never cached: plainly free
  EXPECT_EQ(pool.num_available(), 3);
  EXPECT_EQ(*pool.allocate(), c);  // a plain free block goes before any cached one
  ASSERT_EQ(pool.lookup(k2), std::optional<int32_t>(b));  // a hit takes b off the eviction list
  EXPECT_EQ(*pool.allocate(), a);                          // evicts a, the only evictable block
  EXPECT_FALSE(pool.contains(k1));
  EXPECT_TRUE(pool.contains(k2));
}

TEST(BlockPool, KeysCompareTokensAndParentNotJustTheDigest) {
  const std::vector<int32_t> t = {7, 8, 9};
  const BlockKey root = make_block_key(0, t), other_parent = make_block_key(12345, t);
  EXPECT_NE(root.hash, other_parent.hash);
  BlockPool pool(2);
  const int32_t b = *pool.allocate();
  pool.register_block(b, root);
  BlockKey forged = other_parent;
  forged.hash = root.hash;  // a digest collision must not hand out the block
  EXPECT_FALSE(pool.lookup(forged).has_value());
  EXPECT_TRUE(pool.lookup(root).has_value());
}

TEST(MemoryPool, ReserveIsAllOrNothingAndForksCopyTheSharedPartialBlockOnWrite) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 10 * 4 * 2 * 2 * 8 * 4;  // ten blocks of one kv layer (2 heads of 8, f32)
  MemoryPool pool({CacheSpec::kv(2, 8)}, o);
  ASSERT_EQ(pool.stats().num_blocks, 10);
  auto a = pool.new_sequence(), b = pool.new_sequence();
  std::vector<Sequence*> both = {a.get(), b.get()};
  EXPECT_THROW(pool.reserve(both, std::vector<int64_t>{24, 20}), PoolExhausted);  // 6 + 5 > 10
  EXPECT_TRUE(a->block_table().empty() && b->block_table().empty());
  std::vector<Sequence*> one = {a.get()};
  pool.reserve(one, std::vector<int64_t>{6});
  pool.advance(*a, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  ASSERT_EQ(a->block_table().size(), 2u);
  auto f = pool.fork(*a);
  EXPECT_EQ(f->block_table(), a->block_table());
  std::vector<Sequence*> fork_only = {f.get()};
  EXPECT_EQ(pool.blocks_needed(fork_only, std::vector<int64_t>{1}), 1);  // its own copy of the shared block
  pool.reserve(fork_only, std::vector<int64_t>{1});
  EXPECT_EQ(f->block_table()[0], a->block_table()[0]);  // the full block stays shared
  EXPECT_NE(f->block_table()[1], a->block_table()[1]);
  const int64_t free_before = pool.stats().free_blocks;
  f.reset();
  EXPECT_EQ(pool.stats().free_blocks, free_before + 1);
}

}  // namespace
}  // namespace attnzoo
