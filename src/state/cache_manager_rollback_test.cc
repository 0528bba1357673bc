// Speculative decoding's rollback in the pool: checkpoints copy the recurrent state into slots of their own,
// rollback restores the latest one at or below the wanted length (or truncates exactly, without state layers),
// frees the blocks past it, and every slot goes back to the pool. The bookkeeping decides the copies and the
// storage makes them when flushed, as a forward pass does before it computes.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "state/cache_manager.h"

namespace attnzoo {
namespace {

// Both halves of a pool over one KV layer and one state layer.
struct HybridPool : CacheManager {
  explicit HybridPool(const CacheGeometry& g) : CacheManager(g), storage(g) {}
  // The state layer's slot, current with every queued move.
  float* state(const Sequence& s) {
    flush(storage);
    return storage.layer(1).state(s.state_slot());
  }
  CacheStorage storage;
};

std::unique_ptr<HybridPool> hybrid_pool(int64_t max_sequences) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 1 << 20;
  o.max_sequences = max_sequences;
  o.prefix_caching = false;  // no snapshot slots: checkpoints must come from the free running slots
  return std::make_unique<HybridPool>(plan_cache({CacheSpec::kv(2, 8), CacheSpec::state(16)}, o));
}

void fill_state(HybridPool& pool, const Sequence& s, float base) {
  float* st = pool.state(s);
  for (int i = 0; i < 16; ++i) st[i] = base + float(i);
}

void grow(CacheManager& pool, Sequence& s, int64_t n) {
  std::vector<Sequence*> one = {&s};
  pool.reserve(one, std::vector<int64_t>{n});
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), int32_t(s.length()));
  pool.advance(s, ids);
}

// (Not rollback, but this file has the hybrid pool.) A budget below one block names the bytes, not "0 MiB", and what
// the state slots took of it.
TEST(CacheManagerBudget, BelowOneBlockNamesTheBytesAndTheStateSlots) {
  const CacheSpec kv = CacheSpec::kv(2, 8), state = CacheSpec::state(16);
  const int64_t block = 4 * kv.bytes_per_token(), slot = (state.fixed_bytes() + 63) / 64 * 64;
  PoolOptions o;
  o.block_tokens = 4;
  o.max_sequences = 3;
  o.prefix_caching = false;
  o.bytes = 3 * slot + block - 1;
  try {
    CacheManager pool(plan_cache({kv, state}, o));
    FAIL() << "a pool below one block was made";
  } catch (const PoolExhausted& e) {
    EXPECT_EQ(std::string(e.what()), "kv_cache_memory: " + std::to_string(o.bytes) + " bytes cannot hold one KV block of " +
                                         std::to_string(block) + " bytes (4 tokens) after the recurrent-state slots took " +
                                         std::to_string(3 * slot) + " bytes (3 slots of " + std::to_string(slot) + ")");
  }
}

TEST(CacheManagerRollback, RestoresTheCheckpointedStateAndFreesLaterBlocks) {
  auto pool = hybrid_pool(3);
  auto s = pool->new_sequence();
  grow(*pool, *s, 6);
  fill_state(*pool, *s, 100.f);
  const int64_t free_slots = pool->stats().free_state_slots, free_blocks = pool->stats().free_blocks;
  pool->checkpoint(*s);
  EXPECT_EQ(pool->stats().free_state_slots, free_slots - 1);  // the checkpoint holds a slot
  EXPECT_EQ(s->checkpoint_lengths(), std::vector<int64_t>{6});
  grow(*pool, *s, 7);  // a verification pass: 13 tokens, 4 blocks
  fill_state(*pool, *s, -5.f);
  EXPECT_EQ(pool->stats().free_blocks, free_blocks - 2);
  // Back to 9 tokens: the state is only known at 6, so the sequence stops there and the caller recomputes 3.
  EXPECT_EQ(pool->rollback(*s, 9), 6);
  EXPECT_EQ(s->length(), 6);
  EXPECT_EQ(s->tokens(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(pool->stats().free_blocks, free_blocks);
  const float* st = pool->state(*s);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(st[i], 100.f + float(i));
  // The checkpoint at 6 survives (a later rollback may use it again) until cleared.
  EXPECT_EQ(s->checkpoint_lengths(), std::vector<int64_t>{6});
  pool->clear_checkpoints(*s);
  EXPECT_EQ(pool->stats().free_state_slots, free_slots);
  // Without a checkpoint, going back is an error naming the length; forward or in place is not.
  grow(*pool, *s, 2);
  EXPECT_THROW(pool->rollback(*s, 7), ArgumentError);
  EXPECT_EQ(pool->rollback(*s, 8), 8);
  EXPECT_THROW(pool->rollback(*s, 9), ArgumentError);
  // To an empty sequence needs no checkpoint: the state is zeroed.
  EXPECT_EQ(pool->rollback(*s, 0), 0);
  st = pool->state(*s);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(st[i], 0.f);
}

TEST(CacheManagerRollback, CheckpointSlotsRunOutCleanlyAndComeBack) {
  auto pool = hybrid_pool(2);
  auto a = pool->new_sequence(), b = pool->new_sequence();
  EXPECT_EQ(pool->stats().free_state_slots, 0);
  EXPECT_THROW(pool->checkpoint(*a), PoolExhausted);  // no running or snapshot slot is free
  EXPECT_TRUE(a->checkpoint_lengths().empty());
  b.reset();
  pool->checkpoint(*a);
  EXPECT_EQ(pool->stats().free_state_slots, 0);
  a.reset();  // a released sequence gives back its checkpoints too
  EXPECT_EQ(pool->stats().free_state_slots, 2);
}

// Running slots the caller keeps free (a scheduler's pending forks) are not handed to checkpoints.
TEST(CacheManagerRollback, CheckpointsLeaveTheSlotsTheCallerKeeps) {
  auto pool = hybrid_pool(3);
  auto a = pool->new_sequence();
  EXPECT_THROW(pool->checkpoint(*a, 2), PoolExhausted);  // two free, both kept, no snapshot slot
  EXPECT_EQ(pool->stats().free_state_slots, 2);
  pool->checkpoint(*a, 1);
  EXPECT_EQ(pool->stats().free_state_slots, 1);
  auto b = pool->new_sequence();
  EXPECT_EQ(pool->stats().free_state_slots, 0);
}

// A verification pass that ends on a block boundary registers that block in the prefix cache; a rollback to a
// checkpoint inside it leaves the sequence's only reference on a cached block. It stops being cached (the tokens
// after the checkpoint are rewritten), so recomputing there writes it in place: no copy, even in a full pool.
TEST(CacheManagerRollback, RollbackIntoABlockItCachedWritesItInPlace) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 1 << 20;
  o.max_sequences = 3;  // the sequence, its checkpoint, the other sequence
  CacheManager pool(plan_cache({CacheSpec::kv(2, 8), CacheSpec::state(16)}, o));
  auto s = pool.new_sequence();
  grow(pool, *s, 5);
  pool.checkpoint(*s);
  grow(pool, *s, 3);  // 8 tokens: the verification pass filled block 1, now cached
  const int32_t block = s->block_table()[1];
  // Another sequence takes every block left.
  auto hog = pool.new_sequence();
  grow(pool, *hog, pool.stats().free_blocks * 4);
  ASSERT_EQ(pool.stats().free_blocks, 0);
  const int64_t cached = pool.stats().cached_blocks;
  EXPECT_EQ(pool.rollback(*s, 6), 5);
  EXPECT_EQ(s->block_table().size(), 2u);
  EXPECT_EQ(s->block_table()[1], block);
  EXPECT_EQ(pool.stats().cached_blocks, cached - 1);
  std::vector<Sequence*> one = {s.get()};
  EXPECT_EQ(pool.blocks_needed(one, std::vector<int64_t>{1}), 0);
  grow(pool, *s, 3);  // the recompute and the pass after it, in place
  EXPECT_EQ(s->block_table()[1], block);
  EXPECT_TRUE(pool.pending_ops().empty() || pool.pending_ops().back().kind != CacheOp::Kind::copy_block);
}

TEST(CacheManagerRollback, AttentionAloneTruncatesExactly) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 1 << 20;
  CacheManager pool(plan_cache({CacheSpec::kv(2, 8)}, o));
  auto s = pool.new_sequence();
  grow(pool, *s, 11);
  EXPECT_EQ(pool.rollback(*s, 5), 5);
  EXPECT_EQ(s->length(), 5);
  EXPECT_EQ(s->block_table().size(), 2u);
}

TEST(CacheManagerRollback, SlidingWindowPoolsKeepRollbackRoom) {
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 1 << 20;
  CacheManager tight(plan_cache({CacheSpec::kv(2, 8, /*window=*/8)}, o));
  auto s = tight.new_sequence();
  grow(tight, *s, 24);
  EXPECT_THROW(tight.rollback(*s, 18), ArgumentError);  // its window's first blocks were given back
  o.max_rollback_tokens = 6;
  CacheManager roomy(plan_cache({CacheSpec::kv(2, 8, /*window=*/8)}, o));
  auto r = roomy.new_sequence();
  grow(roomy, *r, 24);
  EXPECT_EQ(roomy.rollback(*r, 18), 18);
}

TEST(CacheManagerRollback, SlidingGroupsBesideAFullOneKeepRollbackRoomToo) {
  // A sliding layer beside a full one: its own block table gives blocks back; the full one's never does.
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 1 << 20;
  const std::vector<CacheSpec> layers = {CacheSpec::kv(2, 8, /*window=*/8), CacheSpec::kv(2, 8)};
  CacheManager tight(plan_cache(layers, o));
  ASSERT_EQ(tight.layout().groups.size(), 2u);
  auto s = tight.new_sequence();
  grow(tight, *s, 24);
  EXPECT_THROW(tight.rollback(*s, 18), ArgumentError);
  o.max_rollback_tokens = 6;
  CacheManager roomy(plan_cache(layers, o));
  auto r = roomy.new_sequence();
  grow(roomy, *r, 24);
  EXPECT_EQ(r->block_tables()[1][0], -1);  // the window group still gave its first block back
  EXPECT_EQ(roomy.rollback(*r, 18), 18);
  EXPECT_EQ(r->block_tables()[0].size(), 5u);
  EXPECT_EQ(r->block_tables()[1].size(), 5u);
  grow(roomy, *r, 6);  // and grows on from there
  EXPECT_EQ(r->length(), 24);
}

TEST(CacheManagerRollback, SlidingWindowIsCheckedWhereTheStateReturnsTo) {
  // A hybrid rolls back to its checkpoint, below the asked length, and recomputes from there: the window of keys
  // that recomputation reads must still be held, not only the one of the asked length.
  PoolOptions o;
  o.block_tokens = 4;
  o.bytes = 1 << 20;
  o.max_sequences = 2;
  o.prefix_caching = false;
  o.max_rollback_tokens = 6;
  CacheManager pool(plan_cache({CacheSpec::kv(2, 8, /*window=*/8), CacheSpec::state(16)}, o));
  auto s = pool.new_sequence();
  grow(pool, *s, 8);
  pool.checkpoint(*s);
  grow(pool, *s, 16);  // 24 tokens: blocks 0 and 1 (positions 0-7) fall out of window + rollback room
  EXPECT_THROW(pool.rollback(*s, 20), ArgumentError);  // 20 alone would be fine; its state comes from 8
  EXPECT_EQ(s->length(), 24);  // a refused rollback changes nothing
  EXPECT_EQ(s->checkpoint_lengths(), std::vector<int64_t>{8});
  s.reset();
  auto t = pool.new_sequence();
  grow(pool, *t, 8);
  pool.checkpoint(*t);
  grow(pool, *t, 4);  // 12 tokens: nothing given back yet
  EXPECT_EQ(pool.rollback(*t, 10), 8);
}

}  // namespace
}  // namespace attnzoo
