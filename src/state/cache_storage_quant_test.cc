// An int8 / fp8 pool: every paged tensor gets its f32 scale tensor, the budget counts them, and a copy on write
// (decided by the manager, made by the storage at the flush) copies a block's scales with its bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "state/cache_manager.h"
#include "state/cache_storage.h"

namespace attnzoo {
namespace {

TEST(CacheStorageQuant, ScalesBesideEveryPagedTensorAndCopiedOnWrite) {
  for (DType dtype : {DType::i8, DType::f8_e4m3}) {
    PoolOptions o;
    o.block_tokens = 4;
    o.kv_dtype = dtype;
    o.bytes = 1 << 20;
    const CacheGeometry geometry = plan_cache({CacheSpec::kv(2, 8), CacheSpec::latent(12), CacheSpec::state(16)}, o);
    CacheManager pool(geometry);
    CacheStorage storage(geometry);
    EXPECT_EQ(storage.bytes(), pool.stats().bytes);
    // K and V: 2 heads x (8 bytes + a 4-byte scale); the latent: 12 bytes + one scale; per token, 4 per block.
    EXPECT_EQ(pool.stats().block_bytes, 4 * (2 * 2 * (8 + 4) + (12 + 4)));
    const LayerMemory kv = storage.layer(0), latent = storage.layer(1);
    const int64_t nb = pool.stats().num_blocks;
    ASSERT_EQ(kv.k.dtype, dtype);
    ASSERT_EQ(kv.k_scale.ndim, 3);
    EXPECT_EQ(kv.k_scale.dtype, DType::f32);
    EXPECT_EQ(kv.k_scale.shape[0], nb);
    EXPECT_EQ(kv.k_scale.shape[1], 4);
    EXPECT_EQ(kv.k_scale.shape[2], 2);
    EXPECT_EQ(kv.v_scale.shape[2], 2);
    ASSERT_EQ(latent.k_scale.ndim, 3);
    EXPECT_EQ(latent.k_scale.shape[2], 1);
    EXPECT_EQ(latent.v_scale.data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(latent.k_scale.data) % alignof(float), 0u);

    // A sequence two tokens into its first block, forked: the child's first write copies that block.
    auto parent = pool.new_sequence();
    Sequence* one[] = {parent.get()};
    const int64_t two[] = {2}, three[] = {3};
    pool.reserve(one, two);
    const int32_t block = parent->block_table()[0];
    auto fill = [&](const TensorView& t, uint8_t seed) {
      if (t.ndim == 0) return;
      const size_t bytes = size_t(t.numel() / t.shape[0]) * dtype_size(t.dtype);
      auto* p = static_cast<uint8_t*>(t.data) + size_t(block) * bytes;
      for (size_t i = 0; i < bytes; ++i) p[i] = uint8_t(seed + i * 7);
    };
    uint8_t seed = 1;
    for (const LayerMemory& m : {kv, latent})
      for (const TensorView* t : {&m.k, &m.v, &m.k_scale, &m.v_scale}) fill(*t, seed++);
    const std::vector<int32_t> tokens = {5, 6};
    pool.advance(*parent, tokens);
    auto child = pool.fork(*parent);
    Sequence* kid[] = {child.get()};
    pool.reserve(kid, three);
    const int32_t copy = child->block_table()[0];
    ASSERT_NE(copy, block);
    pool.flush(storage);
    EXPECT_TRUE(pool.pending_ops().empty());
    for (const LayerMemory& m : {kv, latent})
      for (const TensorView* t : {&m.k, &m.v, &m.k_scale, &m.v_scale}) {
        if (t->ndim == 0) continue;
        const size_t bytes = size_t(t->numel() / t->shape[0]) * dtype_size(t->dtype);
        const auto* p = static_cast<const uint8_t*>(t->data);
        EXPECT_EQ(std::memcmp(p + size_t(copy) * bytes, p + size_t(block) * bytes, bytes), 0);
      }
  }
}

TEST(CacheStorageQuant, RejectsOtherDtypes) {
  PoolOptions o;
  o.kv_dtype = DType::i32;
  EXPECT_THROW(plan_cache({CacheSpec::kv(1, 8)}, o), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
