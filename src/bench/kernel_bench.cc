#include "bench/kernel_bench.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>

#include "core/aligned_buffer.h"
#include "core/cpu_info.h"
#include "core/error.h"
#include "kernels/softmax/attention.h"

namespace attnzoo::bench {

Scale parse_scale(const std::string& name) {
  for (Scale s : {Scale::full, Scale::quick, Scale::tiny})
    if (name == scale_name(s)) return s;
  throw ArgumentError("scale: expected full, quick or tiny, got '" + name + "'");
}

const char* scale_name(Scale s) {
  switch (s) {
    case Scale::full: return "full";
    case Scale::quick: return "quick";
    case Scale::tiny: return "tiny";
  }
  return "?";
}

PrefillShape prefill_shape(Scale s) {
  // Block-sparse: a BigBird-like pattern (local band, global prefix, random blocks) at 64-token blocks.
  switch (s) {
    case Scale::full:
      return {4096, 32, 8, 128, 1024, {.seq_len = 4096, .block = 64, .local_blocks = 4, .global_tokens = 64,
                                       .stride = 0, .random_blocks = 2, .seed = 1}};
    case Scale::quick:
      return {1024, 8, 2, 128, 256, {.seq_len = 1024, .block = 64, .local_blocks = 2, .global_tokens = 64,
                                     .stride = 0, .random_blocks = 1, .seed = 1}};
    case Scale::tiny:
      return {96, 4, 2, 32, 32, {.seq_len = 96, .block = 16, .local_blocks = 2, .global_tokens = 16,
                                 .stride = 0, .random_blocks = 1, .seed = 1}};
  }
  return {};
}

DecodeShape decode_shape(Scale s) {
  switch (s) {
    case Scale::full: return {32768, 32, 8, 128, 16};
    case Scale::quick: return {16384, 32, 8, 128, 16};  // 64 MiB of K+V: beyond L3
    case Scale::tiny: return {300, 4, 2, 32, 16};
  }
  return {};
}

TimingPolicy timing_policy(Scale s) {
  switch (s) {
    case Scale::full: return {.warmup = 1, .min_runs = 3, .max_runs = 50, .min_seconds = 2.0};
    case Scale::quick: return {.warmup = 1, .min_runs = 3, .max_runs = 20, .min_seconds = 0.2};
    case Scale::tiny: return {.warmup = 1, .min_runs = 2, .max_runs = 3, .min_seconds = 0.0};
  }
  return {};
}

// The bandwidth probe must read far more than the last-level cache, or a victim cache that keeps part of the
// buffer between runs inflates the "memory" number (seen: 82 GB/s from a 128 MiB buffer vs 32 MiB of L3).
static int64_t beyond_cache(int64_t bytes) {
  return std::max(bytes, 16 * read_cpu_info().l3_bytes);
}

ProbeSettings probe_settings(Scale s) {
  switch (s) {
    case Scale::full: return {0.25, 5, beyond_cache(int64_t(512) << 20), 5};
    case Scale::quick: return {0.1, 3, beyond_cache(int64_t(256) << 20), 3};
    case Scale::tiny: return {0.01, 1, int64_t(8) << 20, 1};
  }
  return {};
}

int64_t count_visible_pairs(const MaskGeometry& mask, int64_t Tq, int64_t Tk) {
  int64_t n = 0;
  for (int64_t i = 0; i < Tq; ++i) {
    const int64_t qpos = Tk - Tq + i;
    for (int64_t j = 0; j < Tk; ++j) n += mask.visible(qpos, j) ? 1 : 0;
  }
  return n;
}

namespace {

// Uniform values in [-1, 1) from a xorshift generator: fast to fill hundreds of MiB, reproducible.
void fill_random(void* data, DType dtype, int64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    store_from_f32(data, dtype, i, float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 23));
  }
}

struct OwnedTensor {
  AlignedBuffer<uint8_t> bytes;
  TensorView view;
  OwnedTensor(DType dtype, std::initializer_list<int64_t> shape, uint64_t seed) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    bytes.resize(size_t(n) * dtype_size(dtype));
    view = TensorView::contiguous(bytes.data(), dtype, shape);
    if (seed) fill_random(bytes.data(), dtype, n, seed);
  }
};

std::string prefill_shape_text(const PrefillShape& s, const char* extra) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "T=%lld Hq=%lld Hkv=%lld D=%lld%s", (long long)s.T, (long long)s.Hq,
                (long long)s.Hkv, (long long)s.D, extra);
  return buf;
}

}  // namespace

std::vector<KernelResult> bench_prefill_cases(Scale scale) {
  const PrefillShape s = prefill_shape(scale);
  const TimingPolicy policy = timing_policy(scale);
  const BlockMask sparse(s.sparse);
  char window_text[64], sparse_text[96];
  std::snprintf(window_text, sizeof window_text, " window=%lld", (long long)s.window);
  std::snprintf(sparse_text, sizeof sparse_text, " block=%lld density=%.0f%%", (long long)s.sparse.block,
                100.0 * sparse.density());

  struct Case {
    const char* name;
    DType dtype;
    AttentionOptions opts;
    std::string shape;
    int64_t page = 0;  // >0: K/V in a paged cache of such blocks, shuffled, read through the block table
  };
  const int64_t page = decode_shape(scale).page_block;
  char page_text[32];
  std::snprintf(page_text, sizeof page_text, " page=%lld", (long long)page);
  std::vector<Case> cases;
  cases.push_back({"causal f32", DType::f32, {}, prefill_shape_text(s, "")});
  cases.push_back({"causal bf16", DType::bf16, {}, prefill_shape_text(s, "")});
  cases.push_back({"paged bf16", DType::bf16, {}, prefill_shape_text(s, page_text), page});
  AttentionOptions windowed;
  windowed.window = s.window;
  cases.push_back({"sliding window bf16", DType::bf16, windowed, prefill_shape_text(s, window_text)});
  AttentionOptions block_sparse;
  block_sparse.block_mask = &sparse;
  cases.push_back({"block-sparse bf16", DType::bf16, block_sparse, prefill_shape_text(s, sparse_text)});

  std::vector<KernelResult> results;
  for (const Case& c : cases) {
    OwnedTensor q(c.dtype, {1, s.T, s.Hq, s.D}, 1), k(c.dtype, {1, s.T, s.Hkv, s.D}, 2),
        v(c.dtype, {1, s.T, s.Hkv, s.D}, 3), out(c.dtype, {1, s.T, s.Hq, s.D}, 0);
    KernelResult r;
    r.kernel = "softmax prefill";
    r.name = c.name;
    r.shape = c.shape;
    const int64_t pairs = count_visible_pairs(mask_geometry(c.opts), s.T, s.T);
    r.flops = double(pairs) * double(s.Hq) * 4.0 * double(s.D);  // QK^T and PV: 2 FLOPs per product each
    if (c.dtype == DType::f32 && !c.opts.window && !c.opts.block_mask) {
      r.goal_fraction_of_peak = 0.45;
      r.goal_torch_ratio = 1.5;
    }
    if (c.page) {
      const int64_t blocks = (s.T + c.page - 1) / c.page;
      OwnedTensor k_pages(c.dtype, {blocks, c.page, s.Hkv, s.D}, 2), v_pages(c.dtype, {blocks, c.page, s.Hkv, s.D}, 3);
      std::vector<int32_t> table(static_cast<size_t>(blocks)), lens = {int32_t(s.T)};
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(7));  // as a long-running server's allocator leaves them
      const KvCacheView cache{k_pages.view, v_pages.view, lens.data(), table.data(), blocks};
      r.timing = time_median([&] { attention_prefill(q.view, cache, out.view, c.opts); }, policy);
    } else {
      r.timing = time_median([&] { attention_prefill(q.view, k.view, v.view, out.view, c.opts); }, policy);
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace attnzoo::bench
