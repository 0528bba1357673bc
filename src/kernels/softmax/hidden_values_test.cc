// A NaN or Inf in a value row reaches exactly the outputs whose softmax sees its key. The fast kernels multiply
// weights by values a tile at a time, and a hidden key's weight is 0, but 0 * NaN is NaN: so the cases below put
// the bad row where a tile is partly visible (causal diagonals, window edges, block-mask edges, a cached
// prefill's later keys, decode with several new tokens), on every dispatch target and through every value path
// (f32 read in place or packed, f16, bf16 pairs, int8 / fp8 caches whose bad row is a NaN / Inf scale). The
// rows that cannot see it must match the reference (which skips hidden keys), the others must be non-finite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "core/threads.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kHq = 4, kHkv = 2, kBadHead = 1, kBadDim = 3;  // kv head 1 serves q heads 2 and 3

bool row_finite(const HostTensor& t, int64_t row, int64_t Dv) {
  for (int64_t d = 0; d < Dv; ++d)
    if (!std::isfinite(t.at(row * Dv + d))) return false;
  return true;
}

// The reference is non-finite in exactly the rows `sees` names (row = token * kHq + head), and some row does not
// see the bad key, so the case tests something.
void expect_reference_reach(const HostTensor& ref, int64_t Dv, const std::function<bool(int64_t)>& sees) {
  int64_t seen = 0;
  const int64_t rows = ref.numel() / Dv;
  for (int64_t row = 0; row < rows; ++row) {
    seen += sees(row);
    ASSERT_EQ(row_finite(ref, row, Dv), !sees(row)) << "reference row " << row;
  }
  EXPECT_LT(seen, rows);
}

// `out` is non-finite where the reference is and within tol of it everywhere else.
::testing::AssertionResult same_reach(const HostTensor& out, const HostTensor& ref, int64_t Dv, double tol) {
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float want = ref.at(i), got = out.at(i);
    if (std::isfinite(want) ? !(std::fabs(got - want) <= tol) : std::isfinite(got))
      return ::testing::AssertionFailure() << "row " << i / Dv << " element " << i % Dv << ": " << got
                                           << ", reference " << want;
  }
  return ::testing::AssertionSuccess();
}

bool sees_key(const MaskGeometry& mask, int64_t head, int64_t qpos, int64_t key) {
  return key >= 0 && head / (kHq / kHkv) == kBadHead && mask.visible(qpos, key);
}

// --- prefill over q, k, v -------------------------------------------------------------------------------------

struct PrefillCase {
  int64_t Tq, Tk, D = 64;
  AttentionOptions opts{};
};

void check_prefill(const PrefillCase& c, DType dtype, int64_t key, float bad) {
  HostTensor q(dtype, {1, c.Tq, kHq, c.D}, 1), k(dtype, {1, c.Tk, kHkv, c.D}, 2), v(dtype, {1, c.Tk, kHkv, c.D}, 3);
  store_from_f32(v.view.data, dtype, (key * kHkv + kBadHead) * c.D + kBadDim, bad);
  HostTensor ref(DType::f32, {1, c.Tq, kHq, c.D}, 0, 0.f), out(DType::f32, {1, c.Tq, kHq, c.D}, 0, 0.f);
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, c.opts, {}));
  const MaskGeometry mask = mask_geometry(c.opts);
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " Tq=" + std::to_string(c.Tq) + " Tk=" + std::to_string(c.Tk) +
               " key " + std::to_string(key) + " value " + std::to_string(bad));
  expect_reference_reach(ref, c.D, [&](int64_t row) { return sees_key(mask, row % kHq, c.Tk - c.Tq + row / kHq, key); });
  // bf16 pair tiles round the softmax weights to bf16.
  const double tol = dtype == DType::bf16 ? 3e-2 : 2e-5;
  testing::for_each_target([&](Target) {
    attention_prefill(q.view, k.view, v.view, out.view, c.opts);
    EXPECT_TRUE(same_reach(out, ref, c.D, tol));
  });
}

TEST(PrefillHiddenValues, CausalDiagonalTiles) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t key : {40, 100, 130, 199})
      for (float bad : {kNaN, kInf}) check_prefill({200, 200}, dtype, key, bad);
  check_prefill({200, 200, 40}, DType::f32, 100, kNaN);  // Dv off the 16-column padding: V is packed, not read in place
}

TEST(PrefillHiddenValues, SlidingWindowEdges) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t window : {16, 100}) {
      PrefillCase c{300, 300};
      c.opts.window = window;
      for (int64_t key : {40, 150}) check_prefill(c, dtype, key, kNaN);
      c.opts.causal = false;
      check_prefill(c, dtype, 150, kInf);
    }
}

TEST(PrefillHiddenValues, BottomRightAndBlockSparse) {
  BlockMask mask({.seq_len = 300, .block = 32, .local_blocks = 2, .global_tokens = 20, .stride = 4,
                  .random_blocks = 1, .seed = 7});
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_prefill({40, 100}, dtype, 70, kNaN);  // queries at 60..99: key 70 hidden from 60..69
    PrefillCase sparse{300, 300};
    sparse.opts.block_mask = &mask;
    for (int64_t key : {10, 100, 200}) check_prefill(sparse, dtype, key, kNaN);
  }
}

// --- caches: a value row of sequence b at key bad_key[b], and NaN in every row past each sequence's length --------

struct TestCache {
  std::vector<int32_t> lens, table;
  int64_t max_blocks = 0;
  std::optional<HostTensor> k, v, k_scale, v_scale;

  KvCacheView view() const {
    const TensorView none{};
    return {k->view, v->view, lens.data(), table.empty() ? nullptr : table.data(), max_blocks,
            k_scale ? k_scale->view : none, v_scale ? v_scale->view : none};
  }
};

// Sets element `d` of row (b, pos, head) of a contiguous [B, S, Hkv, D] cache to `bad`; in an int8 / fp8 cache the
// row's scale instead.
void poison(testing::CacheTensor& t, int64_t S, int64_t D, int64_t b, int64_t pos, int64_t head, int64_t d, float bad) {
  const int64_t row = (b * S + pos) * kHkv + head;
  if (t.scale)
    t.scale->view.ptr<float>()[row] = bad;
  else
    store_from_f32(t.data->view.data, t.data->view.dtype, row * D + d, bad);
}

// block_size 0: contiguous.
TestCache make_cache(DType dtype, const std::vector<int32_t>& lens, const std::vector<int64_t>& bad_key, float bad,
                     int64_t D, int64_t block_size) {
  const int64_t B = int64_t(lens.size()), S = *std::max_element(lens.begin(), lens.end()) + 5;
  testing::CacheTensor k = testing::make_cache_tensor(dtype, B, S, kHkv, D, 11);
  testing::CacheTensor v = testing::make_cache_tensor(dtype, B, S, kHkv, D, 12);
  for (int64_t b = 0; b < B; ++b) {
    if (bad_key[size_t(b)] >= 0) poison(v, S, D, b, bad_key[size_t(b)], kBadHead, kBadDim, bad);
    for (int64_t pos = lens[size_t(b)]; pos < S; ++pos)
      for (int64_t h = 0; h < kHkv; ++h)
        for (int64_t d = 0; d < D; ++d) {
          poison(k, S, D, b, pos, h, d, kNaN);
          poison(v, S, D, b, pos, h, d, kNaN);
        }
  }
  TestCache c{lens, {}, 0, {}, {}, {}, {}};
  if (!block_size) {
    c.k = std::move(k.data), c.v = std::move(v.data), c.k_scale = std::move(k.scale), c.v_scale = std::move(v.scale);
    return c;
  }
  c.max_blocks = (S + block_size - 1) / block_size;
  const int64_t num_blocks = B * c.max_blocks + 2;
  c.table = testing::shuffled_block_table(B, c.max_blocks, num_blocks, 5);
  auto paged = [&](const HostTensor& t) { return testing::to_paged(t, c.table, c.max_blocks, block_size, num_blocks); };
  c.k = paged(*k.data), c.v = paged(*v.data);
  if (k.scale) c.k_scale = paged(*k.scale), c.v_scale = paged(*v.scale);
  return c;
}

TEST(PrefillHiddenValues, CachedPrefill) {
  const std::vector<int32_t> q_lens = {5, 64, 70}, k_lens = {40, 64, 300}, cu = {0, 5, 69, 139};
  const std::vector<int64_t> bad_key = {-1, 40, 250};
  const VarlenInfo varlen{cu.data(), nullptr, 3};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i8})
    for (int64_t block_size : {0, 16, 7})
      for (int64_t window : {0, 30}) {
        const TestCache cache = make_cache(dtype, k_lens, bad_key, kNaN, 64, block_size);
        const DType q_dtype = dtype == DType::bf16 ? DType::bf16 : DType::f32;  // bf16 and bf16: the pair tiles
        HostTensor q(q_dtype, {cu.back(), kHq, 64}, 3);
        HostTensor ref(DType::f32, {cu.back(), kHq, 64}, 0, 0.f), out(DType::f32, {cu.back(), kHq, 64}, 0, 0.f);
        AttentionOptions opts;
        opts.window = window;
        attention_prefill_reference(make_cached_prefill_problem(q.view, cache.view(), ref.view, opts, varlen));
        const MaskGeometry mask = mask_geometry(opts);
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " block_size " + std::to_string(block_size) + " window " +
                     std::to_string(window));
        expect_reference_reach(ref, 64, [&](int64_t row) {
          const int64_t t = row / kHq;
          const size_t b = size_t(std::upper_bound(cu.begin(), cu.end(), t) - cu.begin() - 1);
          return sees_key(mask, row % kHq, k_lens[b] - q_lens[b] + t - cu[b], bad_key[b]);
        });
        const double tol = dtype == DType::bf16 ? 3e-2 : 1e-4;
        testing::for_each_target([&](Target) {
          attention_prefill(q.view, cache.view(), out.view, opts, varlen);
          EXPECT_TRUE(same_reach(out, ref, 64, tol));
        });
      }
}

// --- decode ------------------------------------------------------------------------------------------------------

struct DecodeCase {
  int64_t Tq;
  int32_t len;  // of sequence 0, whose value row `key` is bad; sequence 1 has 37 clean keys
  int64_t key;
  AttentionOptions opts{};
};

void check_decode(const DecodeCase& c, float bad) {
  const std::vector<int32_t> lens = {c.len, 37};
  const std::vector<int64_t> bad_key = {c.key, -1};
  const int64_t D = 64;
  for (DType kv : {DType::f32, DType::bf16, DType::f16, DType::i8, DType::f8_e4m3})
    for (DType q_dtype : {DType::f32, DType::bf16})  // bf16 queries: the vdpbf16ps / VNNI scores where the CPU has them
      for (int64_t block_size : {0, 16}) {
        const TestCache cache = make_cache(kv, lens, bad_key, bad, D, block_size);
        HostTensor q(q_dtype, {2, c.Tq, kHq, D}, 4);
        HostTensor ref(DType::f32, {2, c.Tq, kHq, D}, 0, 0.f), out(DType::f32, {2, c.Tq, kHq, D}, 0, 0.f);
        attention_decode_reference(q.view, cache.view(), ref.view, c.opts);
        const MaskGeometry mask = mask_geometry(c.opts);
        SCOPED_TRACE(std::string(dtype_name(kv)) + " cache, " + dtype_name(q_dtype) + " q, block_size " +
                     std::to_string(block_size) + ", Tq=" + std::to_string(c.Tq) + " len " + std::to_string(c.len) +
                     " key " + std::to_string(c.key) + " value " + std::to_string(bad));
        expect_reference_reach(ref, D, [&](int64_t row) {
          const int64_t t = row / kHq, b = t / c.Tq;
          return sees_key(mask, row % kHq, lens[size_t(b)] - c.Tq + t % c.Tq, bad_key[size_t(b)]);
        });
        testing::for_each_target([&](Target) {
          attention_decode(q.view, cache.view(), out.view, c.opts);
          // int8 caches against bf16 queries: int16 queries where the CPU has VNNI.
          EXPECT_TRUE(same_reach(out, ref, D, is_quantized_kv(kv) ? 1e-3 : 1e-4));
        });
      }
}

TEST(DecodeHiddenValues, OneTokenWindow) {
  DecodeCase c{1, 100, 90};
  c.opts.window = 5;  // position 99 sees keys 95..99
  for (int64_t key : {90, 94, 95, 99}) {
    c.key = key;
    check_decode(c, kNaN);
  }
  c.key = 64;
  check_decode(c, kInf);
}

TEST(DecodeHiddenValues, SeveralNewTokens) {
  check_decode({4, 100, 99}, kInf);  // hidden from the first three new tokens
  check_decode({4, 100, 97}, kNaN);  // seen by the first one too
  check_decode({8, 64, 60}, kNaN);   // all in one tile
  DecodeCase win{4, 300, 290};
  win.opts.window = 8;  // positions 296, 297 see key 290; 298, 299 do not
  check_decode(win, kNaN);
  BlockMask mask({.seq_len = 300, .block = 16, .local_blocks = 1, .global_tokens = 0, .stride = 0,
                  .random_blocks = 0, .seed = 1});
  DecodeCase sparse{8, 196, 180};  // positions 188..191 share key 180's 16-key mask block, 192..195 do not
  sparse.opts.block_mask = &mask;
  check_decode(sparse, kNaN);
}

TEST(DecodeHiddenValues, SplitKWindow) {
  // Three threads cut the 3000 keys into chunks; the window's edge falls inside one of them.
  ThreadPool::set_global_threads(3);
  DecodeCase c{3, 3000, 2298};
  c.opts.window = 700;  // positions 2997..2999: only 2997 sees key 2298
  check_decode(c, kNaN);
  ThreadPool::set_global_threads(default_thread_count());
}

}  // namespace
}  // namespace attnzoo
