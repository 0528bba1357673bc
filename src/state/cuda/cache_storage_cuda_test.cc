// A memory pool's memory on a GPU: the same geometry as on the host, the manager's moves made as stream-ordered
// copies and memsets, byte for byte what the host storage makes of the same moves. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "state/cache_manager.h"
#include "state/cache_storage.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {

CacheGeometry geometry_on(Device device, DType kv) {
  PoolOptions o;
  o.block_tokens = 4;
  o.kv_dtype = kv;
  o.bytes = 1 << 20;
  o.max_sequences = 4;
  o.device = device;
  return plan_cache({CacheSpec::kv(2, 8), CacheSpec::state(40), CacheSpec::latent(12)}, o);
}

// Every tensor of a storage with its bytes, in layer order (paged tensors of each layer, then its state slab).
std::vector<std::pair<void*, size_t>> regions(const CacheStorage& st, const CacheGeometry& g) {
  std::vector<std::pair<void*, size_t>> out;
  for (int64_t l = 0; l < st.num_layers(); ++l) {
    const LayerMemory m = st.layer(l);
    for (const TensorView* t : {&m.k, &m.v, &m.k_scale, &m.v_scale})
      if (t->ndim > 0) out.push_back({t->data, size_t(t->numel()) * dtype_size(t->dtype)});
    if (m.states) out.push_back({m.states, size_t(m.state_stride * g.num_slots()) * sizeof(float)});
  }
  return out;
}

TEST(CacheStorageCuda, MovesOnTheDeviceEqualTheHostsByteForByte) {
  REQUIRE_GPU();
  for (DType kv : {DType::bf16, DType::i8}) {
    const CacheGeometry host_g = geometry_on(Device::cpu(), kv), dev_g = geometry_on(Device::cuda(), kv);
    ASSERT_EQ(host_g.bytes(), dev_g.bytes());
    CacheStorage host(host_g), dev(dev_g);
    EXPECT_EQ(dev.device(), Device::cuda());
    EXPECT_EQ(dev.layer(0).k.device, Device::cuda());
    const auto hr = regions(host, host_g), dr = regions(dev, dev_g);
    ASSERT_EQ(hr.size(), dr.size());
    for (size_t i = 0; i < hr.size(); ++i) {
      auto* p = static_cast<uint8_t*>(hr[i].first);
      for (size_t b = 0; b < hr[i].second; ++b) p[b] = uint8_t(b * 31 + i * 7 + 1);
      copy_bytes(dr[i].first, Device::cuda(), hr[i].first, Device::cpu(), hr[i].second, current_stream());
    }
    // What a run of the manager decides: forks, copies on write, resets, in an order where it matters.
    CacheManager cache(host_g);
    auto a = cache.new_sequence();
    Sequence* one[] = {a.get()};
    const int64_t six[] = {6}, one_token[] = {1};
    cache.reserve(one, six);
    cache.advance(*a, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
    auto b = cache.fork(*a);
    Sequence* kid[] = {b.get()};
    cache.reserve(kid, one_token);
    cache.reset(*a);
    const std::vector<CacheOp> ops = cache.pending_ops();
    ASSERT_GE(ops.size(), 4u);
    host.apply(ops);
    dev.apply(ops);
    synchronize(current_stream());
    for (size_t i = 0; i < hr.size(); ++i) {
      std::vector<uint8_t> back(dr[i].second);
      copy_bytes(back.data(), Device::cpu(), dr[i].first, Device::cuda(), back.size(), current_stream());
      ASSERT_EQ(std::memcmp(back.data(), hr[i].first, back.size()), 0) << "tensor " << i << ", kv " << dtype_name(kv);
    }
  }
}

TEST(CacheStorageCuda, DefaultBudgetIsAFractionOfTheDevice) {
  REQUIRE_GPU();
  const CudaMemoryInfo m = cuda_memory_info(0);
  ASSERT_GT(m.total_bytes, 0u);
  const int64_t half = device_pool_bytes(Device::cuda(), 0.5);
  EXPECT_LE(half, int64_t(m.total_bytes / 2));
  EXPECT_EQ(half, int64_t(double(m.total_bytes) * 0.5 - double(m.total_bytes - m.free_bytes)));
  PoolOptions o;
  o.device = Device::cuda();
  o.gpu_memory_utilization = 0.05;
  o.kv_dtype = DType::bf16;
  // A small fraction: whatever is in use (this process's context, other tests) may already exceed it.
  try {
    const CacheGeometry g = plan_cache({CacheSpec::kv(8, 128)}, o);
    EXPECT_LE(g.bytes(), int64_t(double(m.total_bytes) * 0.05));
    CacheStorage st(g);
    EXPECT_EQ(st.bytes(), g.bytes());
  } catch (const PoolExhausted& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_memory_utilization"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
