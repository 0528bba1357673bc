#include "state/block_pool.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "state/cache_manager.h"

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

TEST(CacheManager, ReserveIsAllOrNothingAndForksCopyTheSharedPartialBlockOnWrite) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 10 * 4 * 2 * 2 * 8 * 4;  // ten blocks of one kv layer (2 heads of 8, f32)
  CacheManager pool(plan_cache({CacheSpec::kv(2, 8)}, o));
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
  // The bookkeeping only decides the copy; the storage makes it at the next flush.
  const CacheOp cow{CacheOp::Kind::copy_block, a->block_table()[1], f->block_table()[1]};
  EXPECT_EQ(pool.pending_ops(), std::vector<CacheOp>{cow});
  const int64_t free_before = pool.stats().free_blocks;
  f.reset();
  EXPECT_EQ(pool.stats().free_blocks, free_before + 1);
}

TEST(BlockPool, BlocksASlidingWindowLeftAreEvictedBeforeAnyOtherCachedBlock) {
  BlockPool pool(3);
  const int32_t a = *pool.allocate(), b = *pool.allocate(), c = *pool.allocate();
  const std::vector<int32_t> t = {1, 2};
  BlockKey ka = make_block_key(0, t), kb = make_block_key(ka.hash, t), kc = make_block_key(kb.hash, t);
  pool.register_block(a, ka);
  pool.register_block(b, kb);
  pool.register_block(c, kc);
  pool.release(a);                         // least recently used of the ordinary cached blocks
  pool.release(b, /*evict_first=*/true);   // left a window later, still evicted first
  pool.release(c, /*evict_first=*/true);
  EXPECT_EQ(*pool.allocate(), b);
  EXPECT_EQ(*pool.allocate(), c);
  EXPECT_EQ(*pool.allocate(), a);
  // A key names its block group: the same tokens cached by two groups are two blocks.
  BlockPool groups(2);
  const int32_t g0 = *groups.allocate(), g1 = *groups.allocate();
  BlockKey k0 = make_block_key(0, t), k1 = k0;
  k1.group = 1;
  groups.register_block(g0, k0);
  groups.register_block(g1, k1);
  EXPECT_EQ(groups.lookup(k0), std::optional<int32_t>(g0));
  EXPECT_EQ(groups.lookup(k1), std::optional<int32_t>(g1));
}

std::vector<CacheSpec> five_to_one(int64_t repeats, int64_t window) {
  std::vector<CacheSpec> layers;
  for (int64_t r = 0; r < repeats; ++r) {
    for (int i = 0; i < 5; ++i) layers.push_back(CacheSpec::kv(2, 8, window));
    layers.push_back(CacheSpec::kv(2, 8));
  }
  return layers;
}

TEST(BlockLayout, WindowedLayersGetGroupsOfTheirOwnWhenAllLayersAreAlike) {
  // 10 sliding + 2 full: groups two layers wide, the full group first.
  BlockLayout l = block_layout(five_to_one(2, 16));
  ASSERT_EQ(l.groups.size(), 6u);
  EXPECT_EQ(l.slots, 2);
  EXPECT_EQ(l.groups[0].window, 0);
  EXPECT_EQ(l.groups[0].layers, (std::vector<int64_t>{5, 11}));
  EXPECT_EQ(l.groups[1].window, 16);
  EXPECT_EQ(l.groups[1].layers, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(l.held_window(11), 0);
  EXPECT_EQ(l.held_window(10), 16);
  EXPECT_EQ(l.slot_of[11], 1);
  // 3 sliding + 4 full: the full layers' count must divide the width (they hold the context: no unused slots).
  std::vector<CacheSpec> odd(3, CacheSpec::kv(2, 8, 16));
  odd.insert(odd.end(), 4, CacheSpec::kv(2, 8));
  l = block_layout(odd);
  EXPECT_EQ(l.slots, 1);
  EXPECT_EQ(l.groups.size(), 7u);
  // Layers of different shapes, the option off, or one window for all: one group.
  std::vector<CacheSpec> unlike = {CacheSpec::kv(2, 8, 16), CacheSpec::kv(4, 8), CacheSpec::state(8)};
  l = block_layout(unlike);
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].window, 0);
  EXPECT_EQ(l.group_of[2], -1);
  EXPECT_EQ(block_layout(five_to_one(1, 16), /*free_outside_window=*/false).groups.size(), 1u);
  l = block_layout({CacheSpec::kv(2, 8, 16), CacheSpec::kv(2, 8, 16)});
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].window, 16);
  // What inspect reports: a windowed layer holds its window's blocks plus one at any length.
  const std::vector<int64_t> held = bytes_held(five_to_one(1, 16), 131072, 4);
  EXPECT_EQ(held[0], CacheSpec::kv(2, 8).bytes_for(20, 4));
  EXPECT_EQ(held[5], CacheSpec::kv(2, 8).bytes_for(131072, 4));
}

TEST(CacheManager, SlidingWindowGroupsHoldTheirWindowWhileTheFullGroupGrows) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = int64_t(4) << 20;
  CacheManager pool(plan_cache(five_to_one(1, 10), o));
  ASSERT_EQ(pool.layout().groups.size(), 6u);
  EXPECT_EQ(pool.stats().block_bytes, 4 * 2 * 2 * 8 * 4);  // one layer per block
  auto s = pool.new_sequence();
  std::vector<Sequence*> one = {s.get()};
  for (int64_t t = 0; t < 400; ++t) {
    pool.reserve(one, std::vector<int64_t>{1});
    pool.advance(*s, std::vector<int32_t>{int32_t(t % 7)});
    const std::vector<int64_t> used = pool.blocks_in_use();
    ASSERT_EQ(used[0], (t + 4) / 4) << t;  // the full layer: every block
    for (size_t g = 1; g < used.size(); ++g) ASSERT_LE(used[g], (10 + 3) / 4 + 1) << t;  // a window's worth
  }
  EXPECT_EQ(s->block_tables()[1][0], -1);  // given back
  EXPECT_EQ(s->bytes(), (100 + 5 * 3) * pool.stats().block_bytes);
  // The blocks a window left are cached: a prompt ending late in this sequence still hits, with its windows' blocks.
  std::vector<int32_t> prompt(s->tokens().begin(), s->tokens().end());
  auto hit = pool.new_sequence();
  EXPECT_EQ(pool.attach_cached_prefix(*hit, prompt), 396);
  EXPECT_EQ(hit->block_tables()[1][95], -1);  // before its window: not taken
  EXPECT_GE(hit->block_tables()[1][96], 0);   // given back by `s`, still cached
  EXPECT_EQ(hit->block_tables()[1][97], s->block_tables()[1][97]);
  EXPECT_EQ(hit->block_tables()[0][0], s->block_tables()[0][0]);
  // A pool that keeps every block: one group, one table, everything held.
  o.free_outside_window = false;
  CacheManager keep(plan_cache(five_to_one(1, 10), o));
  EXPECT_EQ(keep.layout().groups.size(), 1u);
  auto k = keep.new_sequence();
  std::vector<Sequence*> kone = {k.get()};
  keep.reserve(kone, std::vector<int64_t>{400});
  keep.advance(*k, std::vector<int32_t>(400, 1));
  EXPECT_EQ(keep.blocks_in_use()[0], 100);
  // Admission's bound: the full group's blocks plus each windowed group's window and one step.
  EXPECT_EQ(pool.blocks_at_most(8, 400, 1, 1), 100 + 5 * ((10 + 1 + 3) / 4 + 1));
}

}  // namespace
}  // namespace attnzoo
