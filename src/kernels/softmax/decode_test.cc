// Decode attention (contiguous and paged caches, split-K) against the double-precision reference, on every
// dispatch target; plus agreement with the prefill kernel and the argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "core/batch_invariance.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode_problem.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t Tq, Hq, Hkv, D;
  std::vector<int32_t> lens;  // cache_seqlens, one sequence each
  int64_t block_size = 0;     // 0: contiguous cache
  DType kv_dtype = DType::f32, q_dtype = DType::f32, o_dtype = DType::f32;
  AttentionOptions opts{};
  int64_t Dv = 0;  // 0: same as D
};

// A cache holding the same logical contents contiguously and paged over shuffled physical blocks.
struct Caches {
  int64_t B, S_max, block_size, max_blocks, num_blocks;
  HostTensor k, v;                       // contiguous [B, S_max, Hkv, D]
  std::vector<int32_t> block_table;
  HostTensor k_paged, v_paged;           // [num_blocks, block_size, Hkv, D]
  std::vector<int32_t> lens;

  Caches(const Case& c, uint64_t seed)
      : B(int64_t(c.lens.size())),
        S_max(*std::max_element(c.lens.begin(), c.lens.end()) + 3),
        block_size(c.block_size ? c.block_size : 16),
        max_blocks((S_max + block_size - 1) / block_size),
        num_blocks(B * max_blocks + 2),
        k(c.kv_dtype, {B, S_max, c.Hkv, c.D}, seed),
        v(c.kv_dtype, {B, S_max, c.Hkv, c.Dv ? c.Dv : c.D}, seed + 1),
        block_table(testing::shuffled_block_table(B, max_blocks, num_blocks, seed)),
        k_paged(testing::to_paged(k, block_table, max_blocks, block_size, num_blocks)),
        v_paged(testing::to_paged(v, block_table, max_blocks, block_size, num_blocks)),
        lens(c.lens) {}
  KvCacheView contiguous() const { return {k.view, v.view, lens.data(), nullptr, 0}; }
  KvCacheView paged() const { return {k_paged.view, v_paged.view, lens.data(), block_table.data(), max_blocks}; }
};

void check_case(const Case& c, uint64_t seed = 1) {
  const int64_t B = int64_t(c.lens.size()), Dv = c.Dv ? c.Dv : c.D;
  Caches caches(c, seed);
  const KvCacheView cache = c.block_size ? caches.paged() : caches.contiguous();
  HostTensor q(c.q_dtype, {B, c.Tq, c.Hq, c.D}, seed + 7);
  HostTensor ref(DType::f32, {B, c.Tq, c.Hq, Dv}, 0, 0.f), out(c.o_dtype, {B, c.Tq, c.Hq, Dv}, 0, 0.f);
  attention_decode_reference(q.view, cache, ref.view, c.opts);
  // With f32 outputs only f32 rounding separates kernel and reference, whatever the queries and the cache hold
  // (bf16 / f16 values widen exactly; bf16 products are exact in f32).
  const bool exact = c.o_dtype == DType::f32;
  testing::for_each_target([&](Target) {
    attention_decode(q.view, cache, out.view, c.opts);
    if (exact)
      EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5)
          << "Tq=" << c.Tq << " D=" << c.D << " Hq=" << c.Hq << " Hkv=" << c.Hkv << " bs=" << c.block_size;
    else
      EXPECT_LE(testing::relative_rms(out, ref), 1e-2) << "Tq=" << c.Tq << " D=" << c.D;
    if (c.block_size) {  // same keys through the block table: the very same arithmetic as contiguous
      HostTensor flat(c.o_dtype, {B, c.Tq, c.Hq, Dv}, 0, 0.f);
      attention_decode(q.view, caches.contiguous(), flat.view, c.opts);
      EXPECT_EQ(testing::max_abs_diff(out, flat), 0.0) << "paged differs from contiguous, bs=" << c.block_size;
    }
  });
}

const std::vector<int32_t> kLengths = {1, 7, 63, 64, 65, 257, 1000, 5000};

// The lengths a Tq allows; the 5000-key cache (split-K across several chunks) only for the extreme Tq values,
// to keep the double-precision reference affordable.
std::vector<int32_t> lengths_at_least(int64_t Tq) {
  std::vector<int32_t> out;
  for (int32_t l : kLengths)
    if (l >= Tq && (l < 5000 || Tq == 1 || Tq == kMaxDecodeQueries)) out.push_back(l);
  return out;
}

// Runs fn with the global pool resized (split-K depends on the thread count), then restores it.
void with_threads(int n, const std::function<void()>& fn) {
  ThreadPool::set_global_threads(n);
  fn();
  ThreadPool::set_global_threads(default_thread_count());
}

TEST(Decode, ContiguousRaggedLengthsEveryTq) {
  for (int64_t Tq = 1; Tq <= kMaxDecodeQueries; ++Tq) check_case({Tq, 4, 2, 64, lengths_at_least(Tq)});
}

TEST(Decode, PagedShuffledBlocks) {
  for (int64_t bs : {16, 5, 64})
    for (int64_t Tq : {1, 3, 8}) {
      Case c{Tq, 4, 2, 64, lengths_at_least(Tq)};
      c.block_size = bs;
      check_case(c, uint64_t(bs + Tq));
    }
}

TEST(Decode, SplitKAcrossThreadCounts) {
  // 16 threads cut the 5000-key sequence into ~20 chunks of >= 256 keys; 1 thread keeps it whole.
  for (int threads : {1, 3, 16})
    with_threads(threads, [] {
      for (int64_t bs : {0, 16}) {
        Case c{2, 8, 2, 64, {5000, 257, 1000}};
        c.block_size = bs;
        check_case(c, 11);
      }
    });
}

TEST(Decode, SplitKPlanCoversEveryKeyOnce) {
  Case c{1, 8, 4, 64, {1, 300, 5000}};
  Caches caches(c, 1);
  HostTensor q(DType::f32, {3, 1, 8, 64}, 2), out(DType::f32, {3, 1, 8, 64}, 0, 0.f);
  const DecodeProblem p = make_decode_problem(q.view, caches.contiguous(), out.view, {});
  for (int threads : {1, 2, 16, 64}) {
    const DecodePlan plan = make_decode_plan(p, threads);
    EXPECT_EQ(p.Hkv % plan.heads_per_task, 0);
    std::vector<int64_t> covered(3 * 4, 0);
    for (const DecodeChunk& ch : plan.chunks) {
      EXPECT_GE(ch.k_end - ch.k_begin, 1);
      for (int64_t hk = ch.hk_begin; hk < ch.hk_begin + plan.heads_per_task; ++hk)
        covered[size_t(ch.b * 4 + hk)] += ch.k_end - ch.k_begin;
    }
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t hk = 0; hk < 4; ++hk) EXPECT_EQ(covered[size_t(b * 4 + hk)], c.lens[size_t(b)]) << threads;
    EXPECT_EQ(plan.merges.empty(), threads == 1);
  }
  // Batch 1, long cache, many threads: every head in one task (one memory stream), keys split instead.
  HostTensor q1(DType::f32, {1, 1, 8, 64}, 2), out1(DType::f32, {1, 1, 8, 64}, 0, 0.f);
  HostTensor k_long(DType::f32, {1, 32768, 4, 64}, 0, 0.f);
  std::vector<int32_t> long_len = {32768}, short_len = {100};
  const DecodePlan plan = make_decode_plan(
      make_decode_problem(q1.view, {k_long.view, k_long.view, long_len.data(), nullptr, 0}, out1.view, {}), 16);
  EXPECT_EQ(plan.heads_per_task, 4);
  EXPECT_GE(plan.chunks.size(), 32u);
  // A short cache cannot be split by keys: the heads are split across tasks instead.
  const DecodePlan short_plan = make_decode_plan(
      make_decode_problem(q1.view, {k_long.view, k_long.view, short_len.data(), nullptr, 0}, out1.view, {}), 16);
  EXPECT_EQ(short_plan.heads_per_task, 1);
}

// Batch-invariant plans: chunks end at the multiples of min_chunk whatever the batch and the threads, and every
// (sequence, heads) goes through the merge, one chunk or several.
TEST(Decode, InvariantPlanCutsAtFixedKeys) {
  Case c{1, 8, 4, 64, {1, 300, 5000}};
  Caches caches(c, 1);
  HostTensor q(DType::f32, {3, 1, 8, 64}, 2), out(DType::f32, {3, 1, 8, 64}, 0, 0.f);
  const DecodeProblem p = make_decode_problem(q.view, caches.contiguous(), out.view, {});
  for (int threads : {1, 2, 16}) {
    const DecodePlan plan = make_decode_plan(p, threads, 256, /*invariant=*/true);
    EXPECT_EQ(plan.merges.size(), size_t(3 * 4 / plan.heads_per_task)) << threads;
    for (const DecodeChunk& ch : plan.chunks) {
      EXPECT_GE(ch.slot, 0);
      EXPECT_EQ(ch.k_begin % 256, 0);
      EXPECT_TRUE(ch.k_end % 256 == 0 || ch.k_end == c.lens[size_t(ch.b)]) << ch.k_end;
    }
  }
}

// With invariance on, a query's output is bit for bit the same whether it is decoded alone or beside other
// queries of its sequence (up to kMaxDecodeQueries) and other sequences, on any thread count.
TEST(Decode, InvariantResultsDoNotDependOnTheCall) {
  ScopedBatchInvariant on(true);
  const int64_t Hq = 6, Hkv = 2, D = 64, len = 700;
  Case c{8, Hq, Hkv, D, {len, len}};
  c.block_size = 16;
  Caches caches(c, 3);
  HostTensor q(DType::f32, {2, 8, Hq, D}, 4), out(DType::f32, {2, 8, Hq, D}, 0, 0.f);
  attention_decode(q.view, caches.paged(), out.view, {});
  const int saved = ThreadPool::global().num_threads();
  for (int threads : {1, 2}) {
    ThreadPool::set_global_threads(threads);
    for (int64_t t = 0; t < 8; ++t) {  // query t of sequence 1 alone: it sees keys up to len - 8 + t
      std::vector<int32_t> lens = {int32_t(len - 8 + t + 1)};
      KvCacheView one = caches.paged();
      one.cache_seqlens = lens.data();
      one.block_table += one.max_blocks_per_seq;  // sequence 1's table
      HostTensor q1(DType::f32, {1, 1, Hq, D}, 0, 0.f), o1(DType::f32, {1, 1, Hq, D}, 0, 0.f);
      std::memcpy(q1.view.data, q.view.ptr<float>() + (8 + t) * Hq * D, size_t(Hq * D) * sizeof(float));
      attention_decode(q1.view, one, o1.view, {});
      EXPECT_EQ(0, std::memcmp(o1.view.data, out.view.ptr<float>() + (8 + t) * Hq * D, size_t(Hq * D) * sizeof(float)))
          << "query " << t << ", " << threads << " threads";
    }
  }
  ThreadPool::set_global_threads(saved);
}

TEST(Decode, GqaMqaMha) {
  for (auto [Hq, Hkv] : {std::pair{8, 1}, {8, 8}, {32, 8}, {6, 3}}) {
    check_case({1, Hq, Hkv, 64, {65, 1000}});
    Case c{8, Hq, Hkv, 64, {70, 300}};  // up to 64 query rows per kv head
    c.block_size = 16;
    check_case(c);
  }
}

TEST(Decode, HeadDims) {
  for (int64_t D : {64, 80, 96, 128, 256, 60, 1, 17}) check_case({2, 4, 2, D, {63, 300}});
  Case c{2, 4, 2, 96, {63, 300}};
  c.Dv = 64;  // MLA-like: values narrower than keys
  check_case(c);
  c.Dv = 100;
  c.block_size = 5;
  check_case(c);
}

TEST(Decode, NonCausalAndWindow) {
  Case c{4, 4, 2, 64, {4, 65, 1000}};
  c.opts.causal = false;
  check_case(c);
  c.opts.causal = true;
  for (int64_t w : {1, 3, 16, 100, 5000}) {
    c.opts.window = w;
    c.block_size = w % 2 ? 16 : 0;
    check_case(c);
  }
}

TEST(Decode, SoftcapSinksAlibi) {
  std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f}, slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  for (int threads : {1, 8})
    with_threads(threads, [&] {
      Case c{3, 4, 2, 64, {3, 130, 2000}};
      c.opts.softcap = 5.f;
      check_case(c);
      c.opts.softcap = 0.f;
      c.opts.sinks = sinks.data();
      check_case(c);
      c.opts.alibi_slopes = slopes.data();
      c.opts.window = 700;
      c.opts.softcap = 20.f;
      c.block_size = 16;
      check_case(c);
    });
}

TEST(Decode, BlockSparse) {
  BlockMask mask({.seq_len = 3000, .block = 32, .local_blocks = 2, .global_tokens = 20, .stride = 4,
                  .random_blocks = 1, .seed = 7});
  for (bool causal : {true, false}) {
    Case c{4, 4, 2, 64, {40, 300, 3000}};
    c.opts.block_mask = &mask;
    c.opts.causal = causal;
    check_case(c);
    c.block_size = 16;
    check_case(c);
  }
}

TEST(Decode, RowsThatSeeNothingAreZero) {
  // No local band, only the first block is global: late queries see just that block; with no globals, nothing.
  std::vector<float> sinks = {1.f, 1.f};
  for (int64_t global : {0, 16})
    with_threads(8, [&] {
      BlockMask mask({.seq_len = 4096, .block = 16, .local_blocks = 0, .global_tokens = global});
      Case c{2, 2, 1, 32, {2, 4000}};
      c.opts.block_mask = &mask;
      check_case(c);
      c.opts.sinks = sinks.data();
      check_case(c);
    });
  BlockMask nothing({.seq_len = 64, .block = 16, .local_blocks = 0});
  Caches caches({1, 2, 1, 32, {40}}, 3);
  HostTensor q(DType::f32, {1, 1, 2, 32}, 4), out(DType::f32, {1, 1, 2, 32}, 5);
  AttentionOptions o;
  o.block_mask = &nothing;
  attention_decode(q.view, caches.contiguous(), out.view, o);
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.at(i), 0.f);
}

TEST(Decode, ReducedPrecision) {
  for (DType kv : {DType::bf16, DType::f16})
    for (int64_t bs : {0, 16}) {
      Case c{2, 32, 8, 128, {1000, 65}};
      c.kv_dtype = kv;
      c.q_dtype = DType::bf16;
      c.o_dtype = DType::bf16;
      c.block_size = bs;
      check_case(c);
      c.q_dtype = DType::f32;
      c.o_dtype = DType::f32;
      check_case(c);
    }
}

// bf16 rows are widened in pair order over whole groups of 2 x lanes and in natural order past them; these
// head dims put the boundary everywhere on every target.
TEST(Decode, ReducedPrecisionHeadDims) {
  for (DType kv : {DType::bf16, DType::f16})
    for (int64_t D : {1, 17, 48, 80, 100, 160}) {
      Case c{3, 8, 2, D, {63, 300}};
      c.kv_dtype = kv;
      check_case(c);
      c.Dv = D == 80 ? 40 : 72;
      c.block_size = 16;
      check_case(c);
    }
}

// bf16 queries against a bf16 cache take vdpbf16ps where the CPU has it: every row count of its 4-row blocks,
// and the scale moved onto the scores under softcap, ALiBi and sinks.
TEST(Decode, Bf16QueriesEveryRowCount) {
  for (auto [Tq, Hq, Hkv] : {std::tuple{1, 6, 2}, {2, 6, 2}, {1, 4, 4}, {3, 2, 1}, {1, 32, 8}})
    for (int64_t bs : {0, 16}) {
      Case c{Tq, Hq, Hkv, 64, {70, 300}};
      c.kv_dtype = DType::bf16;
      c.q_dtype = DType::bf16;
      c.block_size = bs;
      check_case(c);
    }
  std::vector<float> sinks(8), slopes(8);
  for (size_t h = 0; h < 8; ++h) {
    sinks[h] = 0.3f * float(h) - 1.f;
    slopes[h] = 0.05f * float(h + 1);
  }
  Case c{2, 8, 2, 128, {65, 1000}};
  c.kv_dtype = DType::bf16;
  c.q_dtype = DType::bf16;
  c.opts.softcap = 20.f;
  c.opts.sinks = sinks.data();
  c.opts.alibi_slopes = slopes.data();
  check_case(c);
}

TEST(Decode, AgreesWithPrefill) {
  // Full caches (every length = S_max) are exactly prefill with Tq < Tk, bottom-right aligned.
  const int64_t B = 2, S = 300, Tq = 5, Hq = 8, Hkv = 2, D = 64;
  for (bool causal : {true, false}) {
    HostTensor q(DType::f32, {B, Tq, Hq, D}, 1), k(DType::f32, {B, S, Hkv, D}, 2), v(DType::f32, {B, S, Hkv, D}, 3);
    HostTensor a(DType::f32, {B, Tq, Hq, D}, 0, 0.f), b(DType::f32, {B, Tq, Hq, D}, 0, 0.f);
    std::vector<int32_t> lens(B, int32_t(S));
    AttentionOptions o;
    o.causal = causal;
    o.window = causal ? 100 : 0;
    attention_decode(q.view, {k.view, v.view, lens.data(), nullptr, 0}, a.view, o);
    attention_prefill(q.view, k.view, v.view, b.view, o);
    EXPECT_LE(testing::max_abs_diff(a, b), 2e-5);
  }
}

TEST(Decode, ErrorsNameTheArgument) {
  Case c{2, 4, 2, 16, {10, 20}};
  c.block_size = 4;
  Caches caches(c, 1);
  HostTensor q(DType::f32, {2, 2, 4, 16}, 1), out(DType::f32, {2, 2, 4, 16}, 0, 0.f);
  const KvCacheView flat = caches.contiguous(), paged = caches.paged();
  auto run = [&](const TensorView& qv, KvCacheView cache, const TensorView& ov, AttentionOptions o = {}) {
    return [=] { attention_decode(qv, cache, ov, o); };
  };
  HostTensor q9(DType::f32, {2, 9, 4, 16}, 1), out9(DType::f32, {2, 9, 4, 16}, 0, 0.f);
  testing::expect_error<ArgumentError>(run(q9.view, flat, out9.view), "q: new_tokens");
  HostTensor q3(DType::f32, {2, 2, 3, 16}, 1), out3(DType::f32, {2, 2, 3, 16}, 0, 0.f);
  testing::expect_error<ArgumentError>(run(q3.view, flat, out3.view), "q: head count 3");
  HostTensor q8(DType::f32, {2, 2, 4, 8}, 1);
  testing::expect_error<ArgumentError>(run(q8.view, flat, out.view), "k_cache: head_dim");
  HostTensor bad_out(DType::f32, {2, 1, 4, 16}, 0, 0.f);
  testing::expect_error<ArgumentError>(run(q.view, flat, bad_out.view), "out: must be [2, 2, 4, 16]");

  std::vector<int32_t> short_lens = {1, 20}, long_lens = {10, 24}, paged_long = {10, 30};
  testing::expect_error<ArgumentError>(run(q.view, {flat.k, flat.v, short_lens.data(), nullptr, 0}, out.view),
                              "cache_seqlens: entry 0 is 1");
  testing::expect_error<ArgumentError>(run(q.view, {flat.k, flat.v, long_lens.data(), nullptr, 0}, out.view),
                              "cache_seqlens: entry 1 is 24, beyond the cache capacity of 23");
  testing::expect_error<ArgumentError>(
      run(q.view, {paged.k, paged.v, paged_long.data(), paged.block_table, paged.max_blocks_per_seq}, out.view),
      "cache_seqlens: entry 1 is 30, beyond the cache capacity of 24");
  testing::expect_error<ArgumentError>(run(q.view, {flat.k, flat.v, nullptr, nullptr, 0}, out.view), "cache_seqlens");

  std::vector<int32_t> table = caches.block_table;
  table[size_t(caches.max_blocks + 2)] = int32_t(caches.num_blocks);  // sequence 1, block 2: used (20 keys)
  testing::expect_error<ArgumentError>(run(q.view, {paged.k, paged.v, paged.cache_seqlens, table.data(),
                                           paged.max_blocks_per_seq}, out.view),
                              "block_table: entry [1, 2]");
  table = caches.block_table;
  table[size_t(caches.max_blocks - 1)] = -1;  // sequence 0, last block: unused (10 keys), padding is fine
  EXPECT_NO_THROW(run(q.view, {paged.k, paged.v, paged.cache_seqlens, table.data(), paged.max_blocks_per_seq},
                      out.view)());

  HostTensor k_bf16(DType::bf16, {2, 23, 2, 16}, 1);
  testing::expect_error<ArgumentError>(run(q.view, {flat.k, k_bf16.view, flat.cache_seqlens, nullptr, 0}, out.view),
                              "v_cache: dtype bfloat16");
  HostTensor k_int(DType::i32, {2, 23, 2, 16}, 0, 0.f);
  testing::expect_error<DTypeError>(run(q.view, {k_int.view, k_int.view, flat.cache_seqlens, nullptr, 0}, out.view),
                           "k_cache");
  HostTensor k_3d(DType::f32, {2, 23, 32}, 1);
  testing::expect_error<ArgumentError>(run(q.view, {k_3d.view, k_3d.view, flat.cache_seqlens, nullptr, 0}, out.view),
                              "k_cache: must be [batch, max_seqlen, kv_heads, head_dim]");

  BlockMask small({.seq_len = 15, .block = 16});
  AttentionOptions o;
  o.block_mask = &small;
  testing::expect_error<ArgumentError>(run(q.view, flat, out.view, o), "block_mask: covers 15");
  o = {};
  o.window = -1;
  testing::expect_error<ArgumentError>(run(q.view, flat, out.view, o), "window");
}

}  // namespace
}  // namespace attnzoo
