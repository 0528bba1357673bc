// The CUDA prefill against the double-precision reference: every option, ragged batches, odd lengths at tile
// edges. Compiled in every build; without CUDA compiled in there is nothing to test, and without a GPU the
// numerical tests skip while the refusals (host-only checks) still run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "testing/test_util.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#endif

namespace attnzoo {
namespace {

#if !ATTNZOO_WITH_CUDA

TEST(CudaPrefill, NotBuilt) { GTEST_SKIP() << cuda_unavailable_reason(); }

#else

using testing::expect_error;
using testing::HostTensor;

// make_prefill_problem over host arrays: check_cuda_prefill reads only shapes, strides, dtypes and pointers.
AttentionProblem host_problem(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& out,
                              const AttentionOptions& opts = {}) {
  return make_prefill_problem(q.view, k.view, v.view, out.view, opts, {});
}

TEST(CudaPrefill, RefusesWhatItDoesNotDo) {
  const DType bf16 = DType::bf16;
  HostTensor q(bf16, {1, 16, 8, 128}, 1), k(bf16, {1, 16, 2, 128}, 2), v(bf16, {1, 16, 2, 128}, 3);
  HostTensor out(bf16, {1, 16, 8, 128}, 0, 0.f);
  std::vector<float> sinks(8, 0.5f);
  AttentionOptions supported;
  supported.window = 4;
  supported.sinks = sinks.data();
  EXPECT_NO_THROW(check_cuda_prefill(host_problem(q, k, v, out, supported)));  // GQA 8/2, window, sinks

  HostTensor q32(DType::f32, {1, 16, 8, 128}, 1), k32(DType::f32, {1, 16, 2, 128}, 2),
      v32(DType::f32, {1, 16, 2, 128}, 3);
  expect_error<DTypeError>([&] { check_cuda_prefill(host_problem(q32, k32, v32, out)); }, "q: ");
  HostTensor k16(DType::f16, {1, 16, 2, 128}, 2), v16(DType::f16, {1, 16, 2, 128}, 3);
  expect_error<DTypeError>([&] { check_cuda_prefill(host_problem(q, k16, v16, out)); }, "k: ");

  HostTensor q80(bf16, {1, 16, 8, 80}, 1), k80(bf16, {1, 16, 2, 80}, 2), v80(bf16, {1, 16, 2, 80}, 3),
      out80(bf16, {1, 16, 8, 80}, 0, 0.f);
  expect_error<ArgumentError>([&] { check_cuda_prefill(host_problem(q80, k80, v80, out80)); },
                              "q: head_dim D on CUDA must be 64, 96, 128 or 256");

  BlockMask mask({.seq_len = 64, .block = 16, .local_blocks = 1});
  AttentionOptions masked;
  masked.block_mask = &mask;
  expect_error<ArgumentError>([&] { check_cuda_prefill(host_problem(q, k, v, out, masked)); }, "block_mask: ");

  // q as every other token of a larger array would be fine; a token stride of 8*128 + 4 is not 16-byte steps.
  HostTensor wide(bf16, {1, 16, 8 * 128 + 4}, 1);
  TensorView strided = q.view;
  strided.data = wide.view.data;
  strided.strides = {16 * (8 * 128 + 4), 8 * 128 + 4, 128, 1};
  expect_error<ArgumentError>(
      [&] { check_cuda_prefill(make_prefill_problem(strided, k.view, v.view, out.view, {}, {})); },
      "q: token and head strides must be multiples of 8");

  TensorView shifted = out.view;  // one element in: 2-byte aligned, not 16
  shifted.data = static_cast<uint16_t*>(out.view.data) + 1;
  shifted.shape[1] = 15;
  TensorView q15 = q.view;
  q15.shape[1] = 15;
  expect_error<ArgumentError>(
      [&] { check_cuda_prefill(make_prefill_problem(q15, k.view, v.view, shifted, {}, {})); }, "out: ");
}

// Host storage for one operand, optionally with spare elements after each token's heads (a slice of a wider
// array, as q is of a fused qkv projection), and its copy on the GPU.
struct Operand {
  std::vector<uint8_t> host;
  TensorView view;  // host view
  DeviceBuffer device;

  Operand(DType dtype, std::vector<int64_t> shape, uint64_t seed, int64_t token_pad = 0, float mean = 0.f) {
    view.dtype = dtype;
    view.ndim = int(shape.size());
    int64_t stride = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
      view.shape[size_t(d)] = shape[size_t(d)];
      view.strides[size_t(d)] = stride;
      stride *= shape[size_t(d)];
      if (d == view.ndim - 2) stride += token_pad;
    }
    const int64_t n = view.shape[0] * view.strides[0];
    host.assign(size_t(std::max<int64_t>(n, 1)) * dtype_size(dtype), 0xFF);  // 0xFFFF: NaN in bf16 and f16
    view.data = host.data();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(mean, 1.f);
    if (seed != 0)
      for (int64_t i = 0; i < n; ++i) store_from_f32(view.data, dtype, i, dist(rng));
    device = DeviceBuffer(Device::cuda(), host.size());
    device.upload(host.data(), host.size());
  }
  TensorView device_view() const {
    TensorView t = view;
    t.data = device.data();
    t.device = Device::cuda();
    return t;
  }
  void download() { device.download(host.data(), host.size()); }
  // Calls fn(flat index) for every element the shape covers (not the padding between tokens).
  template <class Fn>
  void for_each_element(Fn&& fn) const {
    const int64_t tokens = view.numel() / (view.size(-2) * view.size(-1));
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t e = 0; e < view.size(-2) * view.size(-1); ++e) fn(t * view.stride(-3) + e);
  }
};

struct GpuCase {
  std::string name;
  int64_t B, Tq, Tk, Hq, Hkv, D;
  DType in = DType::bf16, out = DType::f32;
  AttentionOptions opts{};
  std::vector<int32_t> cu_q{}, cu_k{};  // packed (varlen) when cu_q is not empty
  int64_t token_pad = 0;
  float v_mean = 0.f;  // an offset on V makes a wrongly included or excluded key move the output by ~mean / Tk
};

// Worst error allowed against the double reference: P is rounded to the input dtype before P V (as in every
// FlashAttention), so bf16 inputs cost ~2^-9 relative on each weight; bf16 / f16 output adds its own rounding.
struct Tolerance {
  double max_abs, rel_rms;
};
Tolerance tolerance(DType in, DType out) {
  if (out == DType::bf16) return {2e-2, 6e-3};
  if (in == DType::bf16) return {8e-3, 4e-3};
  return out == DType::f32 ? Tolerance{2e-3, 1e-3} : Tolerance{5e-3, 2e-3};  // f16 in
}

// Runs the case on the kernel the launcher picks and, where that is the Hopper one, again under its dynamic
// schedule (ATTNZOO_CUDA_PREFILL_SCHEDULE=dynamic; static is the default) and with the sm_80 kernel forced
// (ATTNZOO_CUDA_PREFILL=sm80), so an H100 / H200 checks all three against the reference.
void check_one_path(const GpuCase& c, bool through_public_entry);
void check_on_gpu(const GpuCase& c, bool through_public_entry = false) {
  SCOPED_TRACE(c.name);
  unsetenv("ATTNZOO_CUDA_PREFILL");
  unsetenv("ATTNZOO_CUDA_PREFILL_SCHEDULE");
  check_one_path(c, through_public_entry);
  {
    const Operand q(c.in, {1, 1, c.Hq, c.D}, 11), k(c.in, {1, 1, c.Hkv, c.D}, 12);
    const AttentionProblem p = make_prefill_problem(q.device_view(), k.device_view(), k.device_view(),
                                                    q.device_view(), c.opts, {});
    if (cuda_prefill::choose_prefill_path(p, cuda_device_info(p.device.index).sm_major, nullptr) ==
        cuda_prefill::PrefillPath::sm80)
      return;
  }
  {
    SCOPED_TRACE("Hopper kernel, dynamic schedule");
    setenv("ATTNZOO_CUDA_PREFILL_SCHEDULE", "dynamic", 1);
    check_one_path(c, through_public_entry);
    unsetenv("ATTNZOO_CUDA_PREFILL_SCHEDULE");
  }
  SCOPED_TRACE("sm_80 kernel forced");
  setenv("ATTNZOO_CUDA_PREFILL", "sm80", 1);
  check_one_path(c, through_public_entry);
  unsetenv("ATTNZOO_CUDA_PREFILL");
}

void check_one_path(const GpuCase& c, bool through_public_entry) {
  const bool packed = !c.cu_q.empty();
  const int64_t tq = packed ? c.cu_q.back() : c.Tq;
  const int64_t tk = packed ? (c.cu_k.empty() ? c.cu_q.back() : c.cu_k.back()) : c.Tk;
  auto shape = [&](int64_t T, int64_t H) {
    return packed ? std::vector<int64_t>{T, H, c.D} : std::vector<int64_t>{c.B, T, H, c.D};
  };
  Operand q(c.in, shape(tq, c.Hq), 11, c.token_pad), k(c.in, shape(tk, c.Hkv), 12, c.token_pad),
      v(c.in, shape(tk, c.Hkv), 13, c.token_pad, c.v_mean);
  Operand out(c.out, shape(tq, c.Hq), 0, c.token_pad);  // NaN everywhere: unwritten elements show
  HostTensor ref(DType::f32, shape(tq, c.Hq), 0, 0.f);
  VarlenInfo varlen;
  if (packed) varlen = {c.cu_q.data(), c.cu_k.empty() ? nullptr : c.cu_k.data(), int64_t(c.cu_q.size()) - 1};
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, c.opts, varlen));

  if (through_public_entry) {
    attention_prefill(q.device_view(), k.device_view(), v.device_view(), out.device_view(), c.opts, varlen);
  } else {
    const AttentionProblem p =
        make_prefill_problem(q.device_view(), k.device_view(), v.device_view(), out.device_view(), c.opts, varlen);
    check_cuda_prefill(p);
    attention_prefill_cuda(p, current_stream());
  }
  synchronize(current_stream());
  out.download();

  const Tolerance tol = tolerance(c.in, c.out);
  const double scale = 1.0 + std::fabs(c.v_mean);
  double max_err = 0, num = 0, den = 0;
  int64_t bad = 0, index = 0;
  out.for_each_element([&](int64_t i) {
    const double got = load_as_f32(out.view.data, out.view.dtype, i), want = ref.at(index++);
    if (!std::isfinite(got)) {
      ++bad;
      return;
    }
    max_err = std::max(max_err, std::fabs(got - want));
    num += (got - want) * (got - want);
    den += want * want;
  });
  EXPECT_EQ(bad, 0) << "non-finite outputs (unwritten rows?)";
  EXPECT_LE(max_err, tol.max_abs * scale);
  EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), tol.rel_rms);
  if (c.token_pad > 0) {  // the spare elements between tokens were never written
    int64_t touched = 0;
    const int64_t per_token = out.view.size(-2) * out.view.size(-1);
    for (int64_t t = 0; t < out.view.numel() / per_token; ++t)
      for (int64_t e = per_token; e < out.view.stride(-3); ++e)
        touched += !std::isnan(load_as_f32(out.view.data, out.view.dtype, t * out.view.stride(-3) + e));
    EXPECT_EQ(touched, 0) << "wrote between tokens";
  }
}

#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason()

TEST(CudaPrefill, MatchesReferenceAcrossHeadDims) {
  REQUIRE_GPU();
  for (int64_t D : {64, 96, 128, 256})
    for (bool causal : {true, false}) {
      GpuCase c{"D=" + std::to_string(D) + (causal ? " causal" : " bidirectional"), 2, 129, 129, 4, 4, D};
      c.opts.causal = causal;
      check_on_gpu(c);
    }
}

TEST(CudaPrefill, MatchesReferenceGqaMqaBottomRight) {
  REQUIRE_GPU();
  check_on_gpu({"GQA 8/2, 70 queries over 200 keys (bottom-right causal)", 2, 70, 200, 8, 2, 128});
  check_on_gpu({"MQA 8/1", 1, 33, 33, 8, 1, 64});
  GpuCase c{"GQA 8/2 bidirectional, Tq < Tk", 2, 40, 130, 8, 2, 64};
  c.opts.causal = false;
  check_on_gpu(c);
  check_on_gpu({"one query per sequence, 63 keys", 3, 1, 63, 2, 2, 128});
  check_on_gpu({"long causal GQA", 1, 1024, 1024, 4, 1, 128});
}

// The Hopper kernel's rings (4 stages at D = 64, 3 at 128, 2 at 256: prefill_sm90_params.h) go round more than
// twice (1200 keys: 10 tiles of 128, 19 of 64), so every stage's barriers return to parity 0; two query tiles
// wait on the same K / V.
TEST(CudaPrefill, MatchesReferenceAcrossRingStages) {
  REQUIRE_GPU();
  for (int64_t D : {64, 128, 256}) {
    GpuCase c{"ring wraps, D=" + std::to_string(D), 1, 130, 1200, 4, 2, D};
    c.v_mean = 3.f;
    check_on_gpu(c);
    c.name += " bidirectional";
    c.opts.causal = false;
    check_on_gpu(c);
  }
}

// More (query tile, head) items than an H100 / H200 has multiprocessors (132), so the Hopper kernel's persistent
// CTAs take several each, with their ring, Q buffer and turns carried from one item to the next.
TEST(CudaPrefill, MatchesReferenceWithMoreItemsThanMultiprocessors) {
  REQUIRE_GPU();
  for (int64_t D : {64, 128, 256}) {
    GpuCase c{"150 sequences x 2 heads, D=" + std::to_string(D), 0, 0, 0, 2, 1, D};
    c.cu_q = {0};
    c.cu_k = {0};
    for (int i = 0; i < 150; ++i) {
      c.cu_q.push_back(c.cu_q.back() + 1 + (i * 7) % 40);
      c.cu_k.push_back(c.cu_k.back() + 1 + (i * 7) % 40 + (i * 13) % 150);
    }
    c.v_mean = 3.f;
    check_on_gpu(c);
  }
}

TEST(CudaPrefill, MatchesReferenceVarlen) {
  REQUIRE_GPU();
  GpuCase ragged{"ragged 1, 17, 0, 100, 64, 129", 0, 0, 0, 4, 2, 64};
  ragged.cu_q = {0, 1, 18, 18, 118, 182, 311};
  check_on_gpu(ragged);
  GpuCase more_keys{"ragged, more keys than queries", 0, 0, 0, 2, 1, 128};
  more_keys.cu_q = {0, 1, 10, 10, 74};
  more_keys.cu_k = {0, 5, 40, 41, 141};
  check_on_gpu(more_keys);
  GpuCase window{"ragged, bidirectional window 20, D=256", 0, 0, 0, 2, 2, 256};
  window.cu_q = {0, 17, 117, 181};
  window.opts.window = 20;
  window.opts.causal = false;
  check_on_gpu(window);
  check_on_gpu({"empty batch", 2, 0, 0, 2, 2, 64});
}

// Windows whose first visible key lands on the first, last and middle columns of a key tile (Bc = 64 for D <=
// 128, 32 for D = 256), so both the tile skipping and the per-element mask are exercised at their edges.
TEST(CudaPrefill, MatchesReferenceSlidingWindowAtTileEdges) {
  REQUIRE_GPU();
  for (int64_t w : {1, 2, 17, 31, 32, 33, 34, 63, 64, 65, 66, 100, 129}) {
    GpuCase c{"window " + std::to_string(w) + " D=64", 1, 200, 200, 2, 1, 64};
    c.opts.window = w;
    check_on_gpu(c);
    GpuCase d{"window " + std::to_string(w) + " D=256", 1, 130, 130, 1, 1, 256};
    d.opts.window = w;
    check_on_gpu(d);
    GpuCase e{"window " + std::to_string(w) + " D=128, 100 queries over 190 keys", 1, 100, 190, 1, 1, 128};
    e.opts.window = w;
    check_on_gpu(e);
  }
}

TEST(CudaPrefill, MatchesReferenceSoftcapSinksAlibi) {
  REQUIRE_GPU();
  std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f, 1.f, 3.f, -2.f, 0.25f};
  std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03f, 0.02f, 0.01f, 0.005f};
  std::vector<float> large_sinks(8, 8.f);  // a sink that dominates the denominator
  GpuCase softcap{"softcap 5", 1, 130, 130, 4, 2, 64};
  softcap.opts.softcap = 5.f;
  check_on_gpu(softcap);
  GpuCase sink{"sinks", 1, 130, 130, 8, 2, 128};
  sink.opts.sinks = sinks.data();
  check_on_gpu(sink);
  GpuCase large{"large sinks, bf16 out, D=256", 1, 65, 65, 4, 2, 256, DType::bf16, DType::bf16};
  large.opts.sinks = large_sinks.data();
  check_on_gpu(large);
  GpuCase alibi{"ALiBi", 1, 90, 90, 2, 1, 128, DType::f16, DType::f16};
  alibi.opts.alibi_slopes = slopes.data();
  check_on_gpu(alibi);
  GpuCase all{"softcap + sinks + ALiBi + window", 1, 130, 130, 8, 2, 64};
  all.opts.softcap = 5.f;
  all.opts.sinks = sinks.data();
  all.opts.alibi_slopes = slopes.data();
  all.opts.window = 50;
  check_on_gpu(all);
}

TEST(CudaPrefill, MatchesReferenceInAndOutDtypes) {
  REQUIRE_GPU();
  for (DType in : {DType::bf16, DType::f16})
    for (DType out : {DType::f32, DType::bf16, DType::f16})
      check_on_gpu({std::string(dtype_name(in)) + " -> " + dtype_name(out), 2, 77, 77, 4, 2, 128, in, out});
}

// Keys past the end of a sequence are zero-filled in shared memory and must still be masked: with V offset by
// 3, one stray zero key among 63 moves the output by ~0.05.
TEST(CudaPrefill, MatchesReferenceTailKeysMasked) {
  REQUIRE_GPU();
  for (int64_t D : {64, 96, 128, 256}) {
    const int64_t Tk = D == 256 ? 31 : 63;
    for (int64_t keys : {Tk, 3 * Tk + 2}) {
      GpuCase c{"bidirectional, " + std::to_string(keys) + " keys, D=" + std::to_string(D), 2, 5, keys, 2, 1, D};
      c.opts.causal = false;
      c.v_mean = 3.f;
      check_on_gpu(c);
    }
  }
}

TEST(CudaPrefill, MatchesReferenceStridedViews) {
  REQUIRE_GPU();
  GpuCase c{"token stride padded by 24 elements", 2, 33, 50, 4, 2, 64};
  c.token_pad = 24;
  check_on_gpu(c);
}

TEST(CudaPrefill, PublicEntryRunsOnTheGpu) {
  REQUIRE_GPU();
  check_on_gpu({"attention_prefill with CUDA tensors", 2, 65, 65, 4, 2, 128}, /*through_public_entry=*/true);
}

// The GPU runner's way (models/cuda/step_decode_plans.h): one layer's problem prepared, its metadata copied up
// once, the launch made over another layer's tensors of the same shape. Its output is the output that layer's own
// attention_prefill_cuda writes, bit for bit (the same plan, the same kernel), on whichever path the GPU takes,
// under the Hopper kernel's dynamic schedule (which counts in that metadata copy) and on the sm_80 one forced;
// a second launch over the same copy, as the next layer's, writes the same bits again.
TEST(CudaPrefill, APreparedPlanLaunchesOverAnotherLayersTensors) {
  REQUIRE_GPU();
  const std::vector<int32_t> cu = {0, 70, 77, 200};
  const VarlenInfo varlen{cu.data(), nullptr, 3};
  AttentionOptions opts;
  opts.window = 40;
  for (const char* forced : {static_cast<const char*>(nullptr), "dynamic", "sm80"}) {
    SCOPED_TRACE(forced ? forced : "the GPU's own path");
    const bool schedule = forced && std::strcmp(forced, "dynamic") == 0;
    if (forced) setenv(schedule ? "ATTNZOO_CUDA_PREFILL_SCHEDULE" : "ATTNZOO_CUDA_PREFILL", forced, 1);
    Operand q0(DType::bf16, {200, 4, 128}, 1), k0(DType::bf16, {200, 2, 128}, 2), v0(DType::bf16, {200, 2, 128}, 3);
    Operand q1(DType::bf16, {200, 4, 128}, 4), k1(DType::bf16, {200, 2, 128}, 5), v1(DType::bf16, {200, 2, 128}, 6);
    Operand out0(DType::bf16, {200, 4, 128}, 0), out1(DType::bf16, {200, 4, 128}, 0), own(DType::bf16, {200, 4, 128}, 0);
    const AttentionProblem layer0 =
        make_prefill_problem(q0.device_view(), k0.device_view(), v0.device_view(), out0.device_view(), opts, varlen);
    const AttentionProblem layer1 =
        make_prefill_problem(q1.device_view(), k1.device_view(), v1.device_view(), out1.device_view(), opts, varlen);
    check_cuda_prefill(layer0);
    check_cuda_prefill(layer1);
    const PreparedPrefillCuda prepared = prepare_attention_prefill_cuda(layer0);
    ASSERT_GT(prepared.launch.work_items, 0u);
    DeviceBuffer metadata(Device::cuda(), prepared.launch.metadata.size());
    metadata.upload(prepared.launch.metadata.data(), metadata.bytes());
    launch_prepared_prefill_cuda(prepared, metadata.as<unsigned char>(), {layer1.q, layer1.k, layer1.v, layer1.o},
                                 current_stream());
    attention_prefill_cuda(
        make_prefill_problem(q1.device_view(), k1.device_view(), v1.device_view(), own.device_view(), opts, varlen),
        current_stream());
    synchronize(current_stream());
    out1.download();
    own.download();
    EXPECT_EQ(out1.host, own.host);
    out0.download();
    int64_t written = 0;
    out0.for_each_element([&](int64_t i) { written += !std::isnan(load_as_f32(out0.view.data, DType::bf16, i)); });
    EXPECT_EQ(written, 0) << "the prepared layer's own output was not the launch's";
    const std::vector<uint8_t> nan(out1.host.size(), 0xFF);
    out1.device.upload(nan.data(), nan.size());
    launch_prepared_prefill_cuda(prepared, metadata.as<unsigned char>(), {layer1.q, layer1.k, layer1.v, layer1.o},
                                 current_stream());
    synchronize(current_stream());
    out1.download();
    EXPECT_EQ(out1.host, own.host) << "the second launch over one metadata copy";
    unsetenv("ATTNZOO_CUDA_PREFILL");
    unsetenv("ATTNZOO_CUDA_PREFILL_SCHEDULE");
  }
}

// A misspelt schedule fails by the variable's name on any GPU, not only where the Hopper kernel runs.
TEST(CudaPrefill, RefusesAnUnknownSchedule) {
  REQUIRE_GPU();
  Operand q(DType::bf16, {1, 16, 2, 64}, 1), out(DType::bf16, {1, 16, 2, 64}, 0);
  setenv("ATTNZOO_CUDA_PREFILL_SCHEDULE", "fastest", 1);
  expect_error<ArgumentError>(
      [&] { attention_prefill(q.device_view(), q.device_view(), q.device_view(), out.device_view(), {}, {}); },
      "ATTNZOO_CUDA_PREFILL_SCHEDULE");
  unsetenv("ATTNZOO_CUDA_PREFILL_SCHEDULE");
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
