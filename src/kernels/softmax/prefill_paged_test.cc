// Prefill over a KV cache (paged through a shuffled block table, or contiguous): the same keys read through
// the cache must give exactly what the contiguous kernel gives on the gathered keys, and both must match the
// double-precision reference run on the gathered (contiguous, packed) problem, on every dispatch target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  std::vector<int32_t> q_lens, k_lens;  // per sequence: new queries, keys in the cache (including the queries')
  int64_t block_size;                   // 0: contiguous cache [B, S_max, Hkv, D]
  int64_t Hq = 4, Hkv = 2, D = 64;
  DType q_dtype = DType::f32, kv_dtype = DType::f32;
  AttentionOptions opts{};
  bool padded_q = false;  // q [B, Tq, Hq, D] (every q_lens entry equal) instead of packed with cu_seqlens
};

std::vector<int32_t> offsets(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu = {0};
  for (int32_t l : lens) cu.push_back(cu.back() + l);
  return cu;
}

// A cache with sequence b's first k_lens[b] rows gathered into one packed [total_k, Hkv, D] tensor.
HostTensor gather(const HostTensor& cache, const std::vector<int32_t>& k_lens) {
  const TensorView& c = cache.view;
  const int64_t total = offsets(k_lens).back();
  HostTensor packed(c.dtype, {total, c.shape[2], c.shape[3]}, 0, 0.f);
  const size_t row = size_t(c.strides[1]) * dtype_size(c.dtype);
  int64_t dst = 0;
  for (size_t b = 0; b < k_lens.size(); ++b)
    for (int64_t j = 0; j < k_lens[b]; ++j, ++dst)
      std::memcpy(packed.bytes.data() + size_t(dst) * row, cache.bytes.data() + size_t(int64_t(b) * c.shape[1] + j) * row,
                  row);
  return packed;
}

void check_case(const Case& c, uint64_t seed = 1) {
  const int64_t B = int64_t(c.k_lens.size());
  const int64_t S_max = *std::max_element(c.k_lens.begin(), c.k_lens.end()) + 5;
  const int64_t bs = c.block_size ? c.block_size : S_max;
  const int64_t max_blocks = (S_max + bs - 1) / bs, num_blocks = B * max_blocks + 3;
  HostTensor k(c.kv_dtype, {B, S_max, c.Hkv, c.D}, seed), v(c.kv_dtype, {B, S_max, c.Hkv, c.D}, seed + 1);
  const std::vector<int32_t> table = testing::shuffled_block_table(B, max_blocks, num_blocks, seed);
  HostTensor k_paged = testing::to_paged(k, table, max_blocks, bs, num_blocks);
  HostTensor v_paged = testing::to_paged(v, table, max_blocks, bs, num_blocks);
  const KvCacheView cache = c.block_size
                                ? KvCacheView{k_paged.view, v_paged.view, c.k_lens.data(), table.data(), max_blocks}
                                : KvCacheView{k.view, v.view, c.k_lens.data(), nullptr, 0};

  const std::vector<int32_t> cu_q = offsets(c.q_lens), cu_k = offsets(c.k_lens);
  const int64_t total_q = cu_q.back();
  HostTensor q_packed(c.q_dtype, {total_q, c.Hq, c.D}, seed + 2);
  HostTensor k_packed = gather(k, c.k_lens), v_packed = gather(v, c.k_lens);
  HostTensor ref(DType::f32, {total_q, c.Hq, c.D}, 0, 0.f), flat(DType::f32, {total_q, c.Hq, c.D}, 0, 0.f);
  const VarlenInfo packed{cu_q.data(), cu_k.data(), B};
  attention_prefill_reference(make_prefill_problem(q_packed.view, k_packed.view, v_packed.view, ref.view, c.opts,
                                                   packed));
  // The queries as the cached call sees them: packed, or the same rows viewed as [B, Tq, Hq, D].
  TensorView qv = q_packed.view;
  HostTensor out(DType::f32, {total_q, c.Hq, c.D}, 0, 0.f);
  TensorView ov = out.view;
  VarlenInfo cached{cu_q.data(), nullptr, B};
  if (c.padded_q) {
    const int64_t Tq = c.q_lens[0];
    for (TensorView* t : {&qv, &ov}) {
      *t = TensorView{t->data, t->dtype, 4, {B, Tq, c.Hq, c.D}, {Tq * c.Hq * c.D, c.Hq * c.D, c.D, 1}};
    }
    cached = {};
  }
  const bool exact = c.q_dtype == DType::f32 && c.kv_dtype == DType::f32;
  testing::for_each_target([&](Target) {
    attention_prefill(q_packed.view, k_packed.view, v_packed.view, flat.view, c.opts, packed);
    attention_prefill(qv, cache, ov, c.opts, cached);
    EXPECT_EQ(testing::max_abs_diff(out, flat), 0.0) << "cache differs from contiguous, block_size=" << c.block_size;
    if (exact)
      EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5) << "block_size=" << c.block_size;
    else
      EXPECT_LE(testing::relative_rms(out, ref), 1e-2) << "block_size=" << c.block_size;
  });
}

const std::vector<int32_t> kQueries = {1, 5, 70, 130, 64}, kKeys = {1, 40, 70, 300, 200};

TEST(PrefillPaged, BlockSizesShuffled) {
  for (int64_t bs : {16, 7, 48, 1, 64, 100}) check_case({kQueries, kKeys, bs}, uint64_t(bs));
}

TEST(PrefillPaged, ContiguousCache) { check_case({kQueries, kKeys, 0}); }

TEST(PrefillPaged, PaddedQueries) {
  for (int64_t bs : {0, 16, 7}) check_case({{33, 33, 33}, {33, 90, 161}, bs, 8, 2, 64, DType::f32, DType::f32, {}, true});
}

TEST(PrefillPaged, MaskOptions) {
  std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f}, slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  BlockMask mask({.seq_len = 300, .block = 32, .local_blocks = 2, .global_tokens = 20, .stride = 4,
                  .random_blocks = 1, .seed = 7});
  std::vector<std::function<void(AttentionOptions&)>> variants = {
      [](AttentionOptions& o) { o.causal = false; },
      [](AttentionOptions& o) { o.window = 50; },
      [&](AttentionOptions& o) { o.softcap = 5.f; o.sinks = sinks.data(); },
      [&](AttentionOptions& o) { o.alibi_slopes = slopes.data(); o.window = 64; o.softcap = 20.f; },
      [&](AttentionOptions& o) { o.block_mask = &mask; },
      [&](AttentionOptions& o) { o.block_mask = &mask; o.causal = false; },
  };
  for (int64_t bs : {7, 16}) {
    for (const auto& set : variants) {
      Case c{kQueries, kKeys, bs};
      set(c.opts);
      check_case(c, uint64_t(bs) + 11);
    }
  }
}

TEST(PrefillPaged, HalfPrecisionCaches) {
  // bf16 q and cache: the AVX-512-BF16 pair tiles where the CPU has them; f16 cache with f32 queries.
  for (int64_t bs : {16, 7}) {
    check_case({{20, 129}, {100, 129}, bs, 4, 2, 128, DType::bf16, DType::bf16}, 3);
    check_case({{20, 129}, {100, 129}, bs, 4, 2, 128, DType::f32, DType::f16}, 4);
    check_case({{20, 129}, {100, 129}, bs, 4, 1, 96, DType::f32, DType::bf16}, 5);
  }
}

TEST(PrefillPaged, ErrorsNameTheArgument) {
  const int64_t bs = 4, max_blocks = 5, num_blocks = 8;
  HostTensor k(DType::f32, {num_blocks, bs, 2, 16}, 1), v(DType::f32, {num_blocks, bs, 2, 16}, 2);
  HostTensor q(DType::f32, {6, 4, 16}, 3), out(DType::f32, {6, 4, 16}, 0, 0.f);
  std::vector<int32_t> cu = {0, 2, 6}, lens = {10, 20}, table = {0, 1, 2, -1, -1, 3, 4, 5, 6, 7};
  const VarlenInfo vl{cu.data(), nullptr, 2};
  auto run = [&](KvCacheView cache, VarlenInfo varlen) {
    return [=] { attention_prefill(q.view, cache, out.view, {}, varlen); };
  };
  const KvCacheView good{k.view, v.view, lens.data(), table.data(), max_blocks};
  EXPECT_NO_THROW(run(good, vl)());  // -1 past a sequence's last used block is padding

  std::vector<int32_t> short_lens = {10, 3}, long_lens = {10, 21};
  testing::expect_error<ArgumentError>(run({k.view, v.view, short_lens.data(), table.data(), max_blocks}, vl),
                              "cache_seqlens: entry 1 is 3, but it counts the 4 new tokens");
  testing::expect_error<ArgumentError>(run({k.view, v.view, long_lens.data(), table.data(), max_blocks}, vl),
                              "cache_seqlens: entry 1 is 21, beyond the cache capacity of 20");
  std::vector<int32_t> bad_table = table;
  bad_table[7] = 8;
  testing::expect_error<ArgumentError>(run({k.view, v.view, lens.data(), bad_table.data(), max_blocks}, vl),
                              "block_table: entry [1, 2] = 8");
  testing::expect_error<ArgumentError>(run({k.view, v.view, nullptr, table.data(), max_blocks}, vl), "cache_seqlens");
  const VarlenInfo with_k{cu.data(), cu.data(), 2};
  testing::expect_error<ArgumentError>(run(good, with_k), "cu_seqlens_k");
  HostTensor v_short(DType::f32, {num_blocks, bs + 1, 2, 16}, 2);
  testing::expect_error<ArgumentError>(run({k.view, v_short.view, lens.data(), table.data(), max_blocks}, vl),
                              "v_cache: shape");
  HostTensor v_bf16(DType::bf16, {num_blocks, bs, 2, 16}, 2);
  testing::expect_error<ArgumentError>(run({k.view, v_bf16.view, lens.data(), table.data(), max_blocks}, vl),
                              "v_cache: dtype bfloat16");
  HostTensor k3(DType::f32, {num_blocks, bs, 32}, 1);
  testing::expect_error<ArgumentError>(run({k3.view, k3.view, lens.data(), table.data(), max_blocks}, vl),
                              "k_cache: must be [num_blocks, block_size, kv_heads, head_dim]");
  // A contiguous cache must have one row per sequence.
  testing::expect_error<ArgumentError>(run({k.view, v.view, lens.data(), nullptr, 0}, vl), "k_cache: batch 8");
  BlockMask small({.seq_len = 16, .block = 16});
  AttentionOptions o;
  o.block_mask = &small;
  testing::expect_error<ArgumentError>([&] { attention_prefill(q.view, good, out.view, o, vl); }, "block_mask: covers 16");
}

}  // namespace
}  // namespace attnzoo
