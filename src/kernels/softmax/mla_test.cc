// MLA: the naive prefill against the double reference, the absorbed decode against the naive form on the same
// tokens, paged against contiguous caches, and the errors; on every dispatch target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/softmax/mla.h"
#include "kernels/softmax/mla_matmul.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Dims {
  int64_t H, dn, dr, dv, r;
};

constexpr Dims kSmall{4, 32, 16, 32, 64};
constexpr Dims kDeepSeek{2, 128, 64, 128, 512};

// W_kv_b ~ N(0, r^-1/2) keeps expanded keys and values near unit scale, so scores are O(1).
HostTensor make_weight(const Dims& d, DType dtype, uint64_t seed) {
  return HostTensor(dtype, {d.H * (d.dn + d.dv), d.r}, seed, 1.f / std::sqrt(float(d.r)));
}

MlaWeights weights_of(const HostTensor& w, const Dims& d) {
  return {w.view, d.H, d.dn, d.dr, d.dv, d.r};
}

void check_prefill(const Dims& d, int64_t B, int64_t Tq, int64_t Tk, bool causal, DType dtype = DType::f32) {
  HostTensor q(dtype, {B, Tq, d.H, d.dn + d.dr}, 11), latent(dtype, {B, Tk, d.r + d.dr}, 12);
  HostTensor w = make_weight(d, dtype, 13);
  HostTensor out(dtype, {B, Tq, d.H, d.dv}, 0, 0.f), ref(DType::f32, {B, Tq, d.H, d.dv}, 0, 0.f);
  MlaOptions o;
  o.causal = causal;
  mla_prefill_reference(q.view, latent.view, weights_of(w, d), ref.view, o);
  testing::for_each_target([&](Target) {
    mla_prefill(q.view, latent.view, weights_of(w, d), out.view, o);
    if (dtype == DType::f32)
      EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5) << "Tq=" << Tq << " Tk=" << Tk << " r=" << d.r;
    else
      EXPECT_LE(testing::relative_rms(out, ref), 1e-2);
  });
}

TEST(MlaPrefill, NaiveMatchesReference) {
  for (int64_t T : {1, 17, 64, 100}) check_prefill(kSmall, 2, T, T, true);
  check_prefill(kSmall, 1, 30, 30, false);
  check_prefill(kSmall, 2, 20, 75, true);  // chunked prefill: queries are the last 20 of 75 positions
  check_prefill({3, 24, 0, 40, 48}, 1, 33, 33, true);  // no rope part, ragged dims
  check_prefill({5, 16, 8, 20, 36}, 1, 9, 12, true);
}

TEST(MlaPrefill, DeepSeekDims) { check_prefill(kDeepSeek, 1, 24, 24, true); }

TEST(MlaPrefill, Bf16) { check_prefill(kSmall, 1, 70, 70, true, DType::bf16); }

TEST(MlaPrefill, Varlen) {
  const Dims d = kSmall;
  const std::vector<int32_t> cu_q = {0, 1, 9, 45, 45, 110}, cu_k = {0, 4, 12, 60, 63, 128};
  const int64_t tq = cu_q.back(), tk = cu_k.back();
  HostTensor q(DType::f32, {tq, d.H, d.dn + d.dr}, 21);
  HostTensor w = make_weight(d, DType::bf16, 23);
  HostTensor out(DType::f32, {tq, d.H, d.dv}, 0, 0.f), ref(DType::f32, {tq, d.H, d.dv}, 0, 0.f);
  for (bool separate_k : {false, true}) {
    VarlenInfo vl{cu_q.data(), separate_k ? cu_k.data() : nullptr, int64_t(cu_q.size() - 1)};
    HostTensor lat(DType::f32, {separate_k ? tk : tq, d.r + d.dr}, 22);
    mla_prefill_reference(q.view, lat.view, weights_of(w, d), ref.view, {}, vl);
    testing::for_each_target([&](Target) {
      mla_prefill(q.view, lat.view, weights_of(w, d), out.view, {}, vl);
      EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5);
    });
  }
}

// A decode scenario: a contiguous cache [B, S_max, r + dr] with per-sequence lengths, the same rows as a paged
// cache with shuffled blocks, and the same tokens packed for the naive prefill path.
struct DecodeCase {
  Dims d;
  std::vector<int32_t> lens;
  int64_t Tq, S_max, block_size;
  DType dtype = DType::f32;
  bool causal = true;
};

struct DecodeFixture {
  DecodeCase c;
  HostTensor q, cache, w;
  std::vector<uint8_t> paged_bytes;
  TensorView paged;
  std::vector<int32_t> block_table;
  int64_t max_blocks;

  explicit DecodeFixture(const DecodeCase& dc)
      : c(dc),
        q(dc.dtype, {int64_t(dc.lens.size()), dc.Tq, dc.d.H, dc.d.dn + dc.d.dr}, 31),
        cache(dc.dtype, {int64_t(dc.lens.size()), dc.S_max, dc.d.r + dc.d.dr}, 32),
        w(make_weight(dc.d, dc.dtype, 33)) {
    const int64_t B = int64_t(c.lens.size()), L = c.d.r + c.d.dr, elem = int64_t(dtype_size(c.dtype));
    max_blocks = (c.S_max + c.block_size - 1) / c.block_size;
    const int64_t num_blocks = B * max_blocks + 3;  // spare blocks that no sequence uses
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
    block_table.assign(ids.begin(), ids.begin() + B * max_blocks);
    paged_bytes.assign(size_t(num_blocks * c.block_size * L * elem), 0xff);  // 0xffff.. is NaN: unused rows poison
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < c.S_max; ++j) {
        const int64_t blk = block_table[size_t(b * max_blocks + j / c.block_size)];
        std::memcpy(paged_bytes.data() + ((blk * c.block_size + j % c.block_size) * L) * elem,
                    static_cast<const uint8_t*>(cache.view.data) + (b * c.S_max + j) * L * elem, size_t(L * elem));
      }
    paged = TensorView::contiguous(paged_bytes.data(), c.dtype, {num_blocks, c.block_size, L});
  }
  MlaWeights weights() const { return weights_of(w, c.d); }
  LatentCacheView contiguous_view() const { return {cache.view, c.lens.data(), nullptr, 0}; }
  LatentCacheView paged_view() const { return {paged, c.lens.data(), block_table.data(), max_blocks}; }
  HostTensor new_out(DType t) const { return HostTensor(t, {int64_t(c.lens.size()), c.Tq, c.d.H, c.d.dv}, 0, 0.f); }

  // The naive form on the same tokens: each sequence's valid cache rows packed, queries as the last Tq.
  MlaOptions options() const {
    MlaOptions o;
    o.causal = c.causal;
    return o;
  }

  void naive(const HostTensor& out) const {
    const int64_t B = int64_t(c.lens.size()), L = c.d.r + c.d.dr, elem = int64_t(dtype_size(c.dtype));
    std::vector<int32_t> cu_q{0}, cu_k{0};
    for (int64_t b = 0; b < B; ++b) {
      cu_q.push_back(cu_q.back() + int32_t(c.Tq));
      cu_k.push_back(cu_k.back() + c.lens[size_t(b)]);
    }
    std::vector<uint8_t> packed(size_t(cu_k.back() * L * elem));
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(packed.data() + cu_k[size_t(b)] * L * elem,
                  static_cast<const uint8_t*>(cache.view.data) + b * c.S_max * L * elem,
                  size_t(c.lens[size_t(b)] * L * elem));
    TensorView qv = q.view, ov = out.view;
    qv.ndim = ov.ndim = 3;  // [B, Tq, H, D] contiguous -> [B * Tq, H, D]
    qv.shape = {B * c.Tq, c.d.H, c.d.dn + c.d.dr};
    qv.strides = {c.d.H * (c.d.dn + c.d.dr), c.d.dn + c.d.dr, 1};
    ov.shape = {B * c.Tq, c.d.H, c.d.dv};
    ov.strides = {c.d.H * c.d.dv, c.d.dv, 1};
    VarlenInfo vl{cu_q.data(), cu_k.data(), B};
    mla_prefill(qv, TensorView::contiguous(packed.data(), c.dtype, {cu_k.back(), L}), weights(), ov, options(), vl);
  }
};

void check_decode(const DecodeCase& dc) {
  DecodeFixture f(dc);
  HostTensor ref = f.new_out(DType::f32), naive = f.new_out(DType::f32);
  HostTensor contiguous = f.new_out(dc.dtype), paged = f.new_out(dc.dtype), paged_heads = f.new_out(dc.dtype);
  HostTensor naive_paged = f.new_out(DType::f32);
  // The pool's layout: the same paged cache with a head axis of 1, [num_blocks, block_size, 1, r + dr].
  LatentCacheView with_head = f.paged_view();
  with_head.latent = TensorView::contiguous(f.paged.data, f.paged.dtype,
                                            {f.paged.shape[0], f.paged.shape[1], 1, f.paged.shape[2]});
  mla_decode_reference(f.q.view, f.contiguous_view(), f.weights(), ref.view, f.options());
  testing::for_each_target([&](Target) {
    f.naive(naive);
    mla_decode(f.q.view, f.contiguous_view(), f.weights(), contiguous.view, f.options());
    mla_decode(f.q.view, f.paged_view(), f.weights(), paged.view, f.options());
    mla_decode(f.q.view, with_head, f.weights(), paged_heads.view, f.options());
    EXPECT_EQ(testing::max_abs_diff(paged_heads, paged), 0.0);
    // The naive form straight over the paged cache: the rows it gathers are the packed ones, so it is exact.
    mla_prefill(f.q.view, with_head, f.weights(), naive_paged.view, f.options());
    EXPECT_EQ(testing::max_abs_diff(naive_paged, naive), 0.0);
    if (dc.dtype == DType::f32) {
      // Absorption reorders the sums (q_nope . W_UK c_kv as (W_UK^T q_nope) . c_kv): ~1e-6 apart in f32.
      EXPECT_LE(testing::max_abs_diff(naive, ref), 2e-5);
      EXPECT_LE(testing::max_abs_diff(contiguous, ref), 2e-5);
      EXPECT_LE(testing::max_abs_diff(contiguous, naive), 2e-5);
    } else {
      EXPECT_LE(testing::relative_rms(contiguous, ref), 1e-2);
    }
    EXPECT_LE(testing::max_abs_diff(paged, contiguous), 1e-6);
  });
}

TEST(MlaDecode, AbsorbedMatchesNaiveAndReference) {
  check_decode({kSmall, {37, 64, 1}, 1, 64, 16});
  check_decode({kSmall, {90, 8, 33}, 4, 96, 16});  // speculative verification: 4 new tokens
  check_decode({{3, 24, 0, 40, 48}, {13, 50}, 2, 50, 7});
  check_decode({{16, 32, 16, 32, 64}, {700}, 1, 768, 64});  // batch 1, long cache: split-K
  check_decode({kSmall, {40, 16}, 12, 48, 16});  // 12 new tokens: beyond the decode kernel, tiled prefill kernel
  check_decode({{16, 32, 16, 32, 64}, {20}, 9, 32, 8});  // ditto, batch 1: head blocks
  for (int64_t Tq : {3, 10}) check_decode({kSmall, {30, 17}, Tq, 32, 16, DType::f32, /*causal=*/false});
}

// Chunked prefill on the KV pool: packed queries of different lengths against a paged latent cache (shuffled
// blocks, odd sizes) that already holds them, naive and absorbed, against the reference on the gathered rows.
TEST(MlaPrefill, PagedLatentPackedQueries) {
  const Dims d = kSmall;
  const std::vector<int32_t> q_lens = {10, 23, 1, 0}, k_lens = {50, 23, 7, 12};
  const int64_t B = 4, S_max = 56, L = d.r + d.dr;
  std::vector<int32_t> cu_q = {0}, cu_k = {0};
  for (int64_t b = 0; b < B; ++b) {
    cu_q.push_back(cu_q.back() + q_lens[size_t(b)]);
    cu_k.push_back(cu_k.back() + k_lens[size_t(b)]);
  }
  HostTensor cache(DType::bf16, {B, S_max, L}, 41), q(DType::f32, {cu_q.back(), d.H, d.dn + d.dr}, 42);
  HostTensor w = make_weight(d, DType::f32, 43);
  HostTensor packed(DType::bf16, {cu_k.back(), L}, 0, 0.f);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(packed.bytes.data() + size_t(cu_k[size_t(b)] * L * 2), cache.bytes.data() + size_t(b * S_max * L * 2),
                size_t(k_lens[size_t(b)] * L * 2));
  const std::vector<int64_t> out_shape = {cu_q.back(), d.H, d.dv};
  HostTensor ref(DType::f32, out_shape, 0, 0.f), flat(DType::f32, out_shape, 0, 0.f);
  HostTensor naive(DType::f32, out_shape, 0, 0.f), absorbed(DType::f32, out_shape, 0, 0.f);
  const VarlenInfo packed_k{cu_q.data(), cu_k.data(), B}, cached{cu_q.data(), nullptr, B};
  mla_prefill_reference(q.view, packed.view, weights_of(w, d), ref.view, {}, packed_k);
  for (int64_t bs : {16, 7, 48}) {
    const int64_t max_blocks = (S_max + bs - 1) / bs, num_blocks = B * max_blocks + 2;
    const std::vector<int32_t> table = testing::shuffled_block_table(B, max_blocks, num_blocks, uint64_t(bs));
    HostTensor paged = testing::to_paged(cache, table, max_blocks, bs, num_blocks);
    const LatentCacheView view{paged.view, k_lens.data(), table.data(), max_blocks};
    testing::for_each_target([&](Target) {
      mla_prefill(q.view, packed.view, weights_of(w, d), flat.view, {}, packed_k);
      mla_prefill(q.view, view, weights_of(w, d), naive.view, {}, cached);
      mla_decode(q.view, view, weights_of(w, d), absorbed.view, {}, cached);
      EXPECT_EQ(testing::max_abs_diff(naive, flat), 0.0) << "block_size=" << bs;
      EXPECT_LE(testing::max_abs_diff(naive, ref), 2e-5) << "block_size=" << bs;
      EXPECT_LE(testing::max_abs_diff(absorbed, ref), 2e-5) << "block_size=" << bs;
    });
  }
}

TEST(MlaDecode, DeepSeekDims) { check_decode({kDeepSeek, {45, 3}, 2, 48, 16}); }

TEST(MlaDecode, Bf16) { check_decode({kSmall, {77, 120}, 1, 128, 32, DType::bf16}); }

template <typename Fn>
void expect_argument_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    FAIL() << "expected ArgumentError mentioning " << needle;
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Mla, ErrorsNameTheArgument) {
  const Dims d = kSmall;
  HostTensor q(DType::f32, {1, 4, d.H, d.dn + d.dr}, 1), latent(DType::f32, {1, 4, d.r + d.dr}, 2);
  HostTensor w = make_weight(d, DType::f32, 3), out(DType::f32, {1, 4, d.H, d.dv}, 0, 0.f);
  MlaWeights wt = weights_of(w, d);
  MlaWeights bad = wt;
  bad.v_head_dim = d.dv + 1;
  expect_argument_error([&] { mla_prefill(q.view, latent.view, bad, out.view, {}); }, "w_kv_b");
  bad = wt;
  bad.num_heads = d.H + 1;
  expect_argument_error([&] { mla_prefill(q.view, latent.view, bad, out.view, {}); }, "w_kv_b");
  bad = wt;
  bad.kv_lora_rank = 0;
  expect_argument_error([&] { mla_prefill(q.view, latent.view, bad, out.view, {}); }, "kv_lora_rank");
  HostTensor short_latent(DType::f32, {1, 3, d.r + d.dr}, 2), wide_latent(DType::f32, {1, 4, d.r}, 2);
  expect_argument_error([&] { mla_prefill(q.view, short_latent.view, wt, out.view, {}); }, "q: has more time");
  expect_argument_error([&] { mla_prefill(q.view, wide_latent.view, wt, out.view, {}); }, "latent");
  HostTensor bad_out(DType::f32, {1, 4, d.H, d.dv + 1}, 0, 0.f);
  expect_argument_error([&] { mla_prefill(q.view, latent.view, wt, bad_out.view, {}); }, "out");
  MlaOptions neg;
  neg.scale = -1.f;
  expect_argument_error([&] { mla_prefill(q.view, latent.view, wt, out.view, neg); }, "scale");
  HostTensor ints(DType::i32, {1, 4, d.r + d.dr}, 0, 0.f);
  EXPECT_THROW(mla_prefill(q.view, ints.view, wt, out.view, {}), DTypeError);

  // Decode: cache lengths, block table, cache shape.
  HostTensor cache(DType::f32, {1, 8, d.r + d.dr}, 4);
  std::vector<int32_t> lens = {3}, too_long = {9};
  expect_argument_error([&] { mla_decode(q.view, {cache.view, lens.data()}, wt, out.view, {}); }, "cache_seqlens");
  expect_argument_error([&] { mla_decode(q.view, {cache.view, too_long.data()}, wt, out.view, {}); },
                        "cache_seqlens");
  expect_argument_error([&] { mla_decode(q.view, {cache.view, nullptr}, wt, out.view, {}); }, "cache_seqlens");
  std::vector<int32_t> ok = {6}, table = {0, 5};  // block 5 does not exist (cache has 1 block of 8 rows)
  HostTensor blocks(DType::f32, {1, 4, d.r + d.dr}, 4);
  expect_argument_error([&] { mla_decode(q.view, {blocks.view, ok.data(), table.data(), 2}, wt, out.view, {}); },
                        "block_table");
  HostTensor two_seqs(DType::f32, {2, 8, d.r + d.dr}, 4);
  expect_argument_error([&] { mla_decode(q.view, {two_seqs.view, ok.data()}, wt, out.view, {}); }, "latent_cache");
}

// The weight GEMM on its own: both weight orientations, a bf16 weight, a ragged panel, a batch.
TEST(MlaMatmul, MatchesReference) {
  const int64_t batch = 3, M = 300, N = 70, K = 45;
  HostTensor a(DType::f32, {batch, M, K}, 1);
  for (bool transposed : {false, true})
    for (DType wt : {DType::f32, DType::bf16}) {
      HostTensor w(wt, {batch, transposed ? N : K, transposed ? K : N}, 2);
      HostTensor c(DType::f32, {batch, M, N}, 0, 0.f), ref(DType::f32, {batch, M, N}, 0, 0.f);
      WeightMatmul mm{batch, M, N, K, a.view.ptr<float>(), K, M * K, w.view.data, wt,
                      transposed ? 1 : N, transposed ? K : 1, N * K, nullptr, N, M * N};
      mm.c = ref.view.ptr<float>();
      weight_matmul_reference(mm);
      testing::for_each_target([&](Target) {
        mm.c = c.view.ptr<float>();
        weight_matmul(mm);
        EXPECT_LE(testing::max_abs_diff(c, ref), 1e-5) << "transposed=" << transposed;
      });
    }
}

}  // namespace
}  // namespace attnzoo
