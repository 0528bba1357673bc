// The storage performs the manager's moves in the order they were decided, on every state layer and every paged
// tensor of a block row, and the manager's decisions reach memory only through them.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "state/cache_manager.h"
#include "state/cache_storage.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {

CacheGeometry small_hybrid() {
  PoolOptions o;
  o.block_tokens = 2;
  o.bytes = 1 << 20;
  o.max_sequences = 4;
  o.prefix_caching = false;
  return plan_cache({CacheSpec::kv(1, 4), CacheSpec::state(8), CacheSpec::state(3)}, o);
}

void fill_slot(const CacheStorage& st, int32_t slot, float base) {
  for (int64_t l : {1, 2}) {
    float* p = st.layer(l).state(slot);
    for (int64_t i = 0; i < st.layer(l).state_stride; ++i) p[i] = base + float(l * 100 + i);
  }
}

float slot_value(const CacheStorage& st, int64_t layer, int32_t slot, int64_t i) { return st.layer(layer).state(slot)[i]; }

TEST(CacheStorage, MovesRunInTheOrderDecided) {
  const CacheGeometry g = small_hybrid();
  CacheStorage st(g);
  fill_slot(st, 0, 1.f);
  fill_slot(st, 1, 2.f);
  fill_slot(st, 2, 3.f);
  using K = CacheOp::Kind;
  // Copied, then the source zeroed: the copy keeps the old values.
  const std::vector<CacheOp> a = {{K::copy_state, 0, 1}, {K::zero_state, -1, 0}};
  st.apply(a);
  EXPECT_EQ(slot_value(st, 1, 1, 5), 1.f + 105.f);
  EXPECT_EQ(slot_value(st, 2, 1, 2), 1.f + 202.f);
  EXPECT_EQ(slot_value(st, 1, 0, 5), 0.f);
  EXPECT_EQ(slot_value(st, 2, 0, 2), 0.f);
  // Zeroed, then copied into: the copy wins.
  const std::vector<CacheOp> b = {{K::zero_state, -1, 2}, {K::copy_state, 1, 2}};
  st.apply(b);
  EXPECT_EQ(slot_value(st, 1, 2, 0), 1.f + 100.f);

  const LayerMemory kv = st.layer(0);
  ASSERT_EQ(kv.k.ndim, 4);
  const int64_t row = kv.k.numel() / kv.k.shape[0];
  for (int64_t i = 0; i < row; ++i) {
    kv.k.ptr<float>()[3 * row + i] = float(i);
    kv.v.ptr<float>()[3 * row + i] = -float(i);
  }
  const std::vector<CacheOp> c = {{K::copy_block, 3, 7}};
  st.apply(c);
  for (int64_t i = 0; i < row; ++i) {
    ASSERT_EQ(kv.k.ptr<float>()[7 * row + i], float(i));
    ASSERT_EQ(kv.v.ptr<float>()[7 * row + i], -float(i));
  }
}

TEST(CacheStorage, ForksAndResetsReachMemoryAtTheFlush) {
  const CacheGeometry g = small_hybrid();
  CacheManager cache(g);
  CacheStorage st(g);
  EXPECT_EQ(st.bytes(), cache.stats().bytes);
  auto parent = cache.new_sequence();
  cache.flush(st);
  fill_slot(st, parent->state_slot(), 7.f);
  auto child = cache.fork(*parent);
  // Decided, not yet made: the child's slot still holds whatever it held.
  ASSERT_EQ(cache.pending_ops().size(), 1u);
  EXPECT_EQ(cache.pending_ops()[0], (CacheOp{CacheOp::Kind::copy_state, parent->state_slot(), child->state_slot()}));
  cache.flush(st);
  EXPECT_TRUE(cache.pending_ops().empty());
  EXPECT_EQ(slot_value(st, 1, child->state_slot(), 4), 7.f + 104.f);
  cache.reset(*parent);
  cache.flush(st);
  EXPECT_EQ(slot_value(st, 1, parent->state_slot(), 4), 0.f);
  EXPECT_EQ(slot_value(st, 1, child->state_slot(), 4), 7.f + 104.f);
}

TEST(CacheStorage, DeviceOptionsAreCheckedByName) {
  PoolOptions o;
  o.bytes = 1 << 20;
  for (double bad : {0.0, -0.5, 1.5}) {
    o.gpu_memory_utilization = bad;
    try {
      plan_cache({CacheSpec::kv(1, 8)}, o);
      FAIL() << bad;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("gpu_memory_utilization"), std::string::npos) << e.what();
    }
  }
}

TEST(CacheStorage, AGpuPoolWithoutAGpuIsADeviceError) {
  SKIP_WITH_A_REAL_GPU();
  PoolOptions o;
  o.bytes = 1 << 20;
  o.device = Device::cuda();
  const CacheGeometry g = plan_cache({CacheSpec::kv(1, 8)}, o);  // an explicit budget asks the device nothing
  EXPECT_THROW(CacheStorage{g}, DeviceError);
  o.bytes = 0;  // the default budget asks the device
  EXPECT_THROW(plan_cache({CacheSpec::kv(1, 8)}, o), DeviceError);
}

}  // namespace
}  // namespace attnzoo
