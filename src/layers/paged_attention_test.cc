// paged_attention's prefill with bf16_queries: over a bf16 cache where the bf16 tiles run, the queries are rounded
// to bf16 and the kernel takes its tile path (the same bits as attention_prefill given those bf16 queries, for
// each sequence alone or beside another); anywhere else the flag changes nothing.
#include "layers/paged_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/convert.h"
#include "core/dispatch.h"
#include "kernels/softmax/attention.h"
#include "layers/attention_layer.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

constexpr int64_t kHidden = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 64;

struct Weights {
  HostTensor wq{DType::f32, {kHeads * kHeadDim, kHidden}, 1, 0.3f};
  HostTensor wk{DType::f32, {kKvHeads * kHeadDim, kHidden}, 2, 0.3f};
  HostTensor wv{DType::f32, {kKvHeads * kHeadDim, kHidden}, 3, 0.3f};
  HostTensor wo{DType::f32, {kHidden, kHeads * kHeadDim}, 4, 0.3f};
};

AttentionLayer make_layer(const Weights& w, const Rope& rope) {
  AttentionConfig ac{kHidden, kHeads, kKvHeads, kHeadDim};
  return AttentionLayer(ac, Linear::from_weights(w.wq.view, {}, "q"), Linear::from_weights(w.wk.view, {}, "k"),
                        Linear::from_weights(w.wv.view, {}, "v"), Linear::from_weights(w.wo.view, {}, "o"), {}, {},
                        rope, "attn");
}

struct Filled {
  std::unique_ptr<Sequence> a, b;
  Batch batch;
};

// Two prompts (40 and 23 tokens, both past the decode kernel's query count) through the layer, so the cache
// holds their K / V and `batch` the tables the attention reads.
void fill(testing::MixerHarness& harness, Filled& f) {
  f.a = harness.new_sequence();
  f.b = harness.new_sequence();
  f.batch.add(*f.a, std::vector<int32_t>(40, 0));
  f.batch.add(*f.b, std::vector<int32_t>(23, 0));
  const int64_t T = f.batch.num_tokens();
  const HostTensor x(DType::f32, {T, kHidden}, 21, 1.f);
  std::vector<float> y(size_t(T * kHidden));
  harness.forward(static_cast<const float*>(x.view.data), f.batch, y.data());
}

std::vector<float> run(const float* q, const Batch& batch, const LayerMemory& memory, bool bf16_queries) {
  AttentionOptions opts;
  opts.causal = true;
  std::vector<float> out(size_t(batch.num_tokens() * kHeads * kHeadDim));
  paged_attention(q, kHeads, kHeadDim, batch, memory, opts, out.data(), bf16_queries);
  return out;
}

// attention_prefill over sequences [first, first + n) of the batch with the queries given as bf16.
std::vector<float> kernel_bf16(const std::vector<uint16_t>& q16, const Batch& batch, const LayerMemory& memory,
                               int64_t first, int64_t n) {
  const BlockTables& tables = batch.tables(memory);
  std::vector<int32_t> cu{0};
  for (int64_t s = first; s < first + n; ++s) cu.push_back(cu.back() + int32_t(batch.seq_len(s)));
  const int64_t M = cu.back(), row = kHeads * kHeadDim;
  KvCacheView cache;
  cache.k = memory.k;
  cache.v = memory.v;
  cache.cache_seqlens = batch.cache_seqlens.data() + first;
  cache.block_table = tables.block_table(first);
  cache.max_blocks_per_seq = tables.max_blocks;
  VarlenInfo varlen;
  varlen.cu_seqlens_q = cu.data();
  varlen.num_seqs = n;
  std::vector<float> out(size_t(M * row));
  AttentionOptions opts;
  opts.causal = true;
  attention_prefill(TensorView::contiguous(const_cast<uint16_t*>(q16.data()) + batch.seq_begin(first) * row,
                                           DType::bf16, {M, kHeads, kHeadDim}),
                    cache, TensorView::contiguous(out.data(), DType::f32, {M, kHeads, kHeadDim}), opts, varlen);
  return out;
}

TEST(PagedAttention, Bf16QueriesTakeTheTilesOverABf16Cache) {
  if (!bf16_tiles_enabled()) GTEST_SKIP() << "bf16 products widen to f32 on this CPU / target";
  const Weights w;
  const Rope rope(RopeConfig{kHeadDim});
  const AttentionLayer layer = make_layer(w, rope);
  testing::MixerHarness harness(layer, /*block_tokens=*/7, DType::bf16, /*shuffle_seed=*/5);
  Filled f;
  fill(harness, f);
  const LayerMemory memory = harness.memory();
  const int64_t T = f.batch.num_tokens(), row = kHeads * kHeadDim;
  const HostTensor qs(DType::f32, {T, kHeads, kHeadDim}, 9, 1.f);
  const float* q = static_cast<const float*>(qs.view.data);
  std::vector<uint16_t> q16(size_t(T * row));
  convert_from_f32(q, q16.data(), DType::bf16, q16.size());

  const std::vector<float> got = run(q, f.batch, memory, /*bf16_queries=*/true);
  const std::vector<float> want = kernel_bf16(q16, f.batch, memory, 0, 2);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  // Each sequence alone gets the bits it got beside the other.
  const std::vector<float> a = kernel_bf16(q16, f.batch, memory, 0, 1), b = kernel_bf16(q16, f.batch, memory, 1, 1);
  EXPECT_EQ(0, std::memcmp(got.data(), a.data(), a.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(got.data() + a.size(), b.data(), b.size() * sizeof(float)));
  // Without the flag the queries stay f32 and the K / V tiles are widened: other bits, the same attention.
  const std::vector<float> f32 = run(q, f.batch, memory, /*bf16_queries=*/false);
  EXPECT_NE(0, std::memcmp(got.data(), f32.data(), got.size() * sizeof(float)));
  double err = 0, mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - double(f32[i])));
    mag = std::max(mag, std::fabs(double(f32[i])));
  }
  EXPECT_LT(err, 2e-2 * mag);
}

TEST(PagedAttention, Bf16QueriesChangeNothingOverAnF32Cache) {
  const Weights w;
  const Rope rope(RopeConfig{kHeadDim});
  const AttentionLayer layer = make_layer(w, rope);
  testing::MixerHarness harness(layer, /*block_tokens=*/7, DType::f32, /*shuffle_seed=*/5);
  Filled f;
  fill(harness, f);
  const LayerMemory memory = harness.memory();
  const HostTensor qs(DType::f32, {f.batch.num_tokens(), kHeads, kHeadDim}, 9, 1.f);
  const float* q = static_cast<const float*>(qs.view.data);
  const std::vector<float> on = run(q, f.batch, memory, true), off = run(q, f.batch, memory, false);
  EXPECT_EQ(0, std::memcmp(on.data(), off.data(), on.size() * sizeof(float)));
}

}  // namespace
}  // namespace attnzoo
