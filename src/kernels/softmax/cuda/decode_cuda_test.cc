// The CUDA decode: what it refuses (checked on the host, no GPU needed), and its outputs against the
// double-precision reference run on the same host data (on a GPU; skipped without one). Caches are filled on
// the host, contiguous or paged over shuffled blocks with -1 past each sequence's last block, and copied to the
// device; the problem is the host problem with its tensor pointers swapped for the device copies (seqlens,
// block table, sinks and slopes stay host memory, as attention_decode_cuda takes them).
// Compiled by g++ in every build: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/softmax/block_mask.h"
#include "kernels/softmax/cuda/decode_cuda.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/kv_quant.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

#if ATTNZOO_WITH_CUDA

struct Case {
  int64_t Tq, Hq, Hkv, D;
  std::vector<int32_t> lens;  // cache_seqlens, one sequence each
  int64_t block_size = 0;     // 0: contiguous cache
  DType kv_dtype = DType::bf16, q_dtype = DType::bf16, o_dtype = DType::f32;
  AttentionOptions opts{};
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "Tq=" << c.Tq << " Hq=" << c.Hq << " Hkv=" << c.Hkv << " D=" << c.D << " bs=" << c.block_size
    << " kv=" << dtype_name(c.kv_dtype) << " q=" << dtype_name(c.q_dtype) << " out=" << dtype_name(c.o_dtype)
    << " causal=" << c.opts.causal << " window=" << c.opts.window << " softcap=" << c.opts.softcap
    << " sinks=" << (c.opts.sinks != nullptr) << " alibi=" << (c.opts.alibi_slopes != nullptr) << " lens=";
  for (int32_t l : c.lens) s << l << ",";
  return s.str();
}

using testing::CacheTensor;

CacheTensor make_cache_tensor(const Case& c, int64_t B, int64_t S, uint64_t seed) {
  return testing::make_cache_tensor(c.kv_dtype, B, S, c.Hkv, c.D, seed);
}

struct TestCache {
  int64_t B, S_max, block_size, max_blocks, num_blocks;
  std::vector<int32_t> lens, table;
  CacheTensor k, v;

  TestCache(const Case& c, uint64_t seed)
      : B(int64_t(c.lens.size())),
        S_max(*std::max_element(c.lens.begin(), c.lens.end()) + 3),
        block_size(c.block_size ? c.block_size : S_max),
        max_blocks((S_max + block_size - 1) / block_size),
        num_blocks(B * max_blocks + 2),
        lens(c.lens),
        k(make_cache_tensor(c, B, S_max, seed)),
        v(make_cache_tensor(c, B, S_max, seed + 1)) {
    if (!c.block_size) return;
    table = testing::shuffled_block_table(B, max_blocks, num_blocks, seed);
    for (CacheTensor* t : {&k, &v}) {
      t->data.emplace(testing::to_paged(*t->data, table, max_blocks, block_size, num_blocks));
      if (t->scale) t->scale.emplace(testing::to_paged(*t->scale, table, max_blocks, block_size, num_blocks));
    }
    // Entries past a sequence's last block are padding a kernel must never follow.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = (lens[size_t(b)] + block_size - 1) / block_size; i < max_blocks; ++i)
        table[size_t(b * max_blocks + i)] = -1;
  }
  KvCacheView view() const {
    KvCacheView view{k.data->view, v.data->view, lens.data(), table.empty() ? nullptr : table.data(),
                     table.empty() ? 0 : max_blocks};
    if (k.scale) view.k_scale = k.scale->view, view.v_scale = v.scale->view;
    return view;
  }
};

DeviceBuffer to_device(const HostTensor& h) {
  DeviceBuffer d(Device::cuda(), h.bytes.size());
  d.upload(h.bytes.data(), h.bytes.size());
  return d;
}

// Largest |got - want| (infinite when got holds a NaN or an Inf where want does not) and largest |want|.
std::pair<double, double> compare(const HostTensor& got, const HostTensor& want) {
  double err = 0, top = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.at(i), w = want.at(i);
    err = std::isfinite(g) ? std::max(err, std::fabs(g - w)) : INFINITY;
    top = std::max(top, std::fabs(w));
  }
  return {err, top};
}

// Error allowed relative to max(1, |largest output|). The tensor cores take the softmax weights P in q's dtype
// (relative rounding 2^-9 for bf16, 2^-11 for f16), which bounds the kernel's error; a bf16 / f16 output adds
// its own rounding.
double tolerance(const Case& c) {
  const double compute = c.q_dtype == DType::bf16 ? 4e-3 : 1.5e-3;
  if (c.o_dtype == DType::bf16) return 2e-2;
  if (c.o_dtype == DType::f16) return compute + 4e-3;
  return compute;
}

void check_case(const Case& c, uint64_t seed = 1) {
  SCOPED_TRACE(describe(c));
  const int64_t B = int64_t(c.lens.size());
  const TestCache cache(c, seed);
  HostTensor q(c.q_dtype, {B, c.Tq, c.Hq, c.D}, seed + 7);
  HostTensor ref(DType::f32, {B, c.Tq, c.Hq, c.D}, 0, 0.f), out(c.o_dtype, {B, c.Tq, c.Hq, c.D}, 0, 0.f);
  attention_decode_reference(q.view, cache.view(), ref.view, c.opts);

  DecodeProblem p = make_decode_problem(q.view, cache.view(), out.view, c.opts);
  ASSERT_NO_THROW(check_cuda_decode(p));
  const DeviceBuffer dq = to_device(q), dk = to_device(*cache.k.data), dv = to_device(*cache.v.data);
  std::optional<DeviceBuffer> dks, dvs;
  if (cache.k.scale) dks.emplace(to_device(*cache.k.scale)), dvs.emplace(to_device(*cache.v.scale));
  // NaN bytes (0xff) in out, so a row the kernel forgets to write fails the comparison.
  DeviceBuffer dout(Device::cuda(), out.bytes.size());
  const std::vector<uint8_t> poison(out.bytes.size(), 0xff);
  dout.upload(poison.data(), poison.size());
  p.q = dq.data();
  p.o = dout.data();
  p.k = dk.data();
  p.v = dv.data();
  if (dks) p.k_scale.data = dks->as<float>(), p.v_scale.data = dvs->as<float>();

  attention_decode_cuda(p, current_stream());
  synchronize(current_stream());
  dout.download(out.bytes.data(), out.bytes.size());
  const auto [err, top] = compare(out, ref);
  EXPECT_LE(err, tolerance(c) * std::max(1.0, top)) << "largest |output| " << top;
}

TEST(CudaDecode, RefusesWhatItDoesNotDo) {
  const std::vector<int32_t> lens = {10, 20};
  auto problem = [&](DType q_dtype, DType kv_dtype, int64_t D, const AttentionOptions& opts = {},
                     int64_t q_head_stride = 0) {
    // Members outlive the call: the problem keeps pointers into them.
    static std::vector<std::unique_ptr<HostTensor>> keep;
    keep.push_back(std::make_unique<HostTensor>(q_dtype, std::vector<int64_t>{2, 1, 8, D + 8}, 1));
    TensorView qv = keep.back()->view;
    qv.shape[3] = D;
    qv.strides[2] = q_head_stride ? q_head_stride : D + 8;  // a padded head stride, aligned unless told
    qv.strides[1] = 8 * (D + 8);
    qv.strides[0] = 8 * (D + 8);
    keep.push_back(std::make_unique<HostTensor>(kv_dtype, std::vector<int64_t>{2, 32, 2, D}, 2));
    const TensorView kv = keep.back()->view;
    keep.push_back(std::make_unique<HostTensor>(DType::f32, std::vector<int64_t>{2, 1, 8, D}, 0, 0.f));
    const TensorView ov = keep.back()->view;
    KvCacheView cache{kv, kv, lens.data(), nullptr, 0};
    if (is_quantized_kv(kv_dtype)) {
      keep.push_back(std::make_unique<HostTensor>(DType::f32, std::vector<int64_t>{2, 32, 2}, 0, 0.f));
      cache.k_scale = cache.v_scale = keep.back()->view;
    }
    return make_decode_problem(qv, cache, ov, opts);
  };
  auto refuse = [](const DecodeProblem& p) { return [p] { check_cuda_decode(p); }; };

  EXPECT_NO_THROW(check_cuda_decode(problem(DType::bf16, DType::bf16, 128)));
  EXPECT_NO_THROW(check_cuda_decode(problem(DType::f16, DType::i8, 64)));
  EXPECT_NO_THROW(check_cuda_decode(problem(DType::bf16, DType::f8_e4m3, 256)));
  EXPECT_NO_THROW(check_cuda_decode(problem(DType::bf16, DType::i8, 96)));  // Phi-3 / Phi-3.5 mini

  testing::expect_error<DTypeError>(refuse(problem(DType::bf16, DType::f32, 128)), "k_cache");
  testing::expect_error<DTypeError>(refuse(problem(DType::bf16, DType::f16, 128)), "k_cache: dtype float16");
  testing::expect_error<DTypeError>(refuse(problem(DType::f32, DType::bf16, 128)), "q:");
  testing::expect_error<ArgumentError>(refuse(problem(DType::bf16, DType::bf16, 80)), "q: head_dim D on CUDA");
  BlockMask mask({.seq_len = 64, .block = 16, .local_blocks = 1});
  AttentionOptions masked;
  masked.block_mask = &mask;
  testing::expect_error<ArgumentError>(refuse(problem(DType::bf16, DType::bf16, 128, masked)), "block_mask");
  testing::expect_error<ArgumentError>(refuse(problem(DType::bf16, DType::bf16, 128, {}, 132)), "q: head stride");

  // Values narrower than keys (MLA-like) are a later step.
  HostTensor q(DType::bf16, {2, 1, 8, 128}, 1), k(DType::bf16, {2, 32, 2, 128}, 2), v(DType::bf16, {2, 32, 2, 64}, 3);
  HostTensor o(DType::f32, {2, 1, 8, 64}, 0, 0.f);
  testing::expect_error<ArgumentError>(
      refuse(make_decode_problem(q.view, {k.view, v.view, lens.data(), nullptr, 0}, o.view, {})), "v_cache");
}

#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason()

TEST(CudaDecode, MatchesSmallContiguousAndPaged) {
  REQUIRE_GPU();
  for (int64_t bs : {0, 16, 64})
    for (int64_t Tq : {1, 4}) {
      Case c{Tq, 8, 2, 128, {4, 17, 300}};
      c.block_size = bs;
      check_case(c, uint64_t(bs + Tq));
    }
  // The shortest cache a Tq allows (every query sees a different number of keys), and a block size that does
  // not divide the tile.
  Case c{4, 8, 2, 64, {4, 5, 64, 65}};
  c.block_size = 5;
  check_case(c, 3);
}

TEST(CudaDecode, MatchesSmallOutputTypes) {
  REQUIRE_GPU();
  for (DType out : {DType::f32, DType::bf16, DType::f16}) {
    Case c{2, 8, 2, 128, {17, 300}};
    c.o_dtype = out;
    c.block_size = 16;
    check_case(c);
    c.q_dtype = c.kv_dtype = DType::f16;
    check_case(c);
  }
}

TEST(CudaDecode, MatchesSmallGroupings) {
  REQUIRE_GPU();
  // GQA 32/8, MQA, MHA; Tq * G past 16 rows takes the 64-row CTA, past 64 rows several row groups.
  for (auto [Hq, Hkv] : {std::pair{32, 8}, {8, 1}, {8, 8}, {6, 3}, {64, 1}})
    for (int64_t Tq : {1, 4}) {
      Case c{Tq, Hq, Hkv, 64, {17, 300}};
      c.block_size = 16;
      check_case(c, uint64_t(Hq + Tq));
    }
}

TEST(CudaDecode, MatchesSmallHeadDims) {
  REQUIRE_GPU();
  for (int64_t D : {64, 96, 128, 256})
    for (int64_t Tq : {1, 4}) {
      Case c{Tq, 8, 2, D, {int32_t(1 + 3 * Tq), 200}};
      c.block_size = Tq == 1 ? 0 : 16;
      check_case(c, uint64_t(D + Tq));
    }
}

TEST(CudaDecode, MatchesSmallMasksAndScores) {
  REQUIRE_GPU();
  std::vector<float> sinks(8), slopes(8);
  for (size_t h = 0; h < 8; ++h) {
    sinks[h] = 0.5f * float(h) - 2.f;
    slopes[h] = 0.02f * float(h + 1);
  }
  for (int64_t bs : {0, 16}) {
    Case c{4, 8, 2, 128, {4, 70, 700}};
    c.block_size = bs;
    c.opts.window = 100;  // shorter than the context: the first chunk starts at the window, on a tile boundary
    check_case(c, 5);
    c.opts.window = 1;  // each query sees only itself
    check_case(c, 6);
    c.opts.window = 0;
    c.opts.causal = false;
    check_case(c, 7);
    c.opts.causal = true;
    c.opts.softcap = 5.f;
    check_case(c, 8);
    c.opts.softcap = 0.f;
    c.opts.sinks = sinks.data();
    check_case(c, 9);
    c.opts.sinks = nullptr;
    c.opts.alibi_slopes = slopes.data();
    check_case(c, 10);
    c.opts.sinks = sinks.data();
    c.opts.softcap = 20.f;
    c.opts.window = 300;
    check_case(c, 11);
  }
}

TEST(CudaDecode, MatchesSmallQuantizedCaches) {
  REQUIRE_GPU();
  for (DType kv : {DType::i8, DType::f8_e4m3})
    for (DType q : {DType::bf16, DType::f16})
      for (int64_t bs : {0, 16}) {
        Case c{bs ? 3 : 1, 8, 2, 128, {17, 300, 1000}};
        c.kv_dtype = kv;
        c.q_dtype = q;
        c.block_size = bs;
        check_case(c, uint64_t(bs) + 2);
      }
  for (int64_t D : {64, 96, 256}) {
    Case c{2, 8, 2, D, {40, 300}};
    c.kv_dtype = DType::i8;
    c.block_size = 16;
    check_case(c, uint64_t(D));
  }
  Case phi3{1, 8, 8, 96, {40, 1000}};  // fp8 at head_dim 96, MHA as Phi-3 mini: one 16-row group per head
  phi3.kv_dtype = DType::f8_e4m3;
  phi3.block_size = 16;
  check_case(phi3, 96);
}

// Ragged long caches: the long sequences are split into chunks and merged, the short ones written directly.
TEST(CudaDecode, MatchesRaggedSplitSequences) {
  REQUIRE_GPU();
  for (int64_t bs : {0, 16, 64})
    for (int64_t Tq : {1, 4}) {
      Case c{Tq, 32, 8, 128, {1 + int32_t(Tq), 17, 300, 4096, 5000}};
      c.block_size = bs;
      check_case(c, uint64_t(bs + Tq));
    }
  std::vector<float> sinks(32, 1.f);
  Case c{2, 32, 8, 128, {300, 4096, 5000}};
  c.block_size = 16;
  c.opts.sinks = sinks.data();
  c.opts.window = 3000;
  check_case(c, 21);
  c.opts = {};
  c.kv_dtype = DType::f8_e4m3;
  check_case(c, 22);
  c.kv_dtype = DType::i8;
  c.q_dtype = DType::f16;
  check_case(c, 23);
}

// Batch 1, one long sequence: the chunks of one (sequence, head) fill the GPU.
TEST(CudaDecode, MatchesOneLongSequence) {
  REQUIRE_GPU();
  Case c{1, 32, 8, 128, {32768}};
  c.block_size = 16;
  check_case(c, 31);
}

#else

TEST(CudaDecode, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
