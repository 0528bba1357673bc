// The CUDA prefill's tile code (prefill_tile.cuh, and the Hopper path's prefill_sm90_tile.cuh on the emulated
// wgmma / TMA / mbarriers) and launch plans run under the CTA emulator against the
// double-precision reference: seeded random cases over ragged varlen batches, GQA / MQA, causal (bottom-right),
// windows, softcap, sinks, ALiBi, head dims 64 / 96 / 128 / 256 (96 on the sm_80 kernel only), bf16 / f16 in,
// f32 / bf16 / f16 out, odd lengths at tile edges and padded token strides. Shapes are small: every emulated thread is a fiber.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/cuda/prefill_launch_plan.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#include "kernels/softmax/cuda/prefill_sm90_tile.cuh"
#include "kernels/softmax/cuda/prefill_tile.cuh"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_prefill;
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;

// prefill.cu's kernel body, launched on the emulator.
template <class Elem, int D>
void launch(const PrefillParams& params, unsigned work_items, unsigned heads) {
  cuda_emulation::launch(dim3(work_items, heads), kThreads, TileShape<D>::kSmemBytes, [&](unsigned char* smem) {
    attend_tile<Elem, D>(params, int(blockIdx.x), int(blockIdx.y), smem);
  });
}

template <class Elem>
void launch_for_dim(int64_t D, const PrefillParams& params, unsigned work_items, unsigned heads) {
  switch (D) {
    case 64: return launch<Elem, 64>(params, work_items, heads);
    case 96: return launch<Elem, 96>(params, work_items, heads);
    case 128: return launch<Elem, 128>(params, work_items, heads);
    default: return launch<Elem, 256>(params, work_items, heads);
  }
}

// prefill_sm90.cu's kernel body, on a persistent grid of `ctas`. The emulator runs the CTAs one after another,
// so under the dynamic schedule CTA 0 draws every item past the first grid's and the others take only their
// first: a schedule as unlike the static one as any a GPU would make.
template <class Elem, int D, PrefillSchedule S>
void launch_sm90(const PrefillSm90Params& params, unsigned ctas) {
  cuda_emulation::launch(dim3(ctas), kSm90Threads, Sm90Layout<D>::kSmemBytes, [&](unsigned char* smem) {
    attend_tiles_sm90<Elem, D, S>(params, int(blockIdx.x), int(gridDim.x), smem);
  });
}

template <class Elem, PrefillSchedule S>
void launch_sm90_for_dim(int64_t D, const PrefillSm90Params& params, unsigned ctas) {
  if (D == 64) launch_sm90<Elem, 64, S>(params, ctas);
  else if (D == 128) launch_sm90<Elem, 128, S>(params, ctas);
  else launch_sm90<Elem, 256, S>(params, ctas);
}

template <class Elem>
void launch_sm90_for(PrefillSchedule schedule, int64_t D, const PrefillSm90Params& params, unsigned ctas) {
  if (schedule == PrefillSchedule::dynamic) launch_sm90_for_dim<Elem, PrefillSchedule::dynamic>(D, params, ctas);
  else launch_sm90_for_dim<Elem, PrefillSchedule::static_stride>(D, params, ctas);
}

// The Hopper plan of `p` with its metadata on the emulated device, as prefill.cu binds it.
struct Sm90Launch {
  PrefillSm90Plan plan;
  DeviceMemory metadata;
  PrefillSm90Params params;
  explicit Sm90Launch(const AttentionProblem& p, int multiprocessors)
      : plan(plan_prefill_sm90(p, multiprocessors)), metadata(std::max<size_t>(plan.launch.metadata.size(), 1)) {
    std::memcpy(metadata.data(), plan.launch.metadata.data(), plan.launch.metadata.size());
    params = {bind_metadata(plan.launch, metadata.data()), sm90::encode_tensor_map(plan.q),
              sm90::encode_tensor_map(plan.k), sm90::encode_tensor_map(plan.v), int32_t(p.Hq), plan.items,
              reinterpret_cast<uint32_t*>(metadata.data() + plan.schedule_at)};
  }
  void run(PrefillSchedule schedule, DType in, int64_t D) const {
    if (plan.launch.work_items == 0) return;
    if (in == DType::bf16) launch_sm90_for<__nv_bfloat16>(schedule, D, params, plan.ctas);
    else launch_sm90_for<__half>(schedule, D, params, plan.ctas);
  }
  std::array<uint32_t, 2> counters() const { return {params.schedule[0], params.schedule[1]}; }
};

// Runs the problem through one kernel's plan and body. The Hopper kernel's persistent grid has `multiprocessors`
// CTAs at most; 0 takes a few, varied by the seed.
void run(PrefillPath path, const AttentionProblem& p, DType in, uint64_t seed,
         PrefillSchedule schedule = PrefillSchedule::static_stride, int multiprocessors = 0) {
  cuda_emulation::seed_schedule(seed);
  if (path == PrefillPath::sm80) {
    const PrefillLaunchPlan plan = plan_prefill_launch(p);
    if (plan.work_items == 0) return;
    DeviceMemory metadata(plan.metadata.size());
    std::memcpy(metadata.data(), plan.metadata.data(), plan.metadata.size());
    const PrefillParams params = bind_metadata(plan, metadata.data());
    if (in == DType::bf16) launch_for_dim<__nv_bfloat16>(p.D, params, plan.work_items, unsigned(p.Hq));
    else launch_for_dim<__half>(p.D, params, plan.work_items, unsigned(p.Hq));
    return;
  }
  ASSERT_EQ(sm90_prefill_gap(p), nullptr);
  // A few "multiprocessors", so each persistent CTA takes one item or several (sometimes items with no key
  // tiles), and the ring, the Q buffer and the turns carry over between them.
  const Sm90Launch launch(p, multiprocessors > 0 ? multiprocessors : 1 + int(seed % 4));
  if (launch.plan.launch.work_items == 0) return;
  launch.run(schedule, in, p.D);
  // The dynamic schedule's last CTA leaves the counters as the plan uploaded them, for the next launch.
  EXPECT_EQ(launch.counters(), (std::array<uint32_t, 2>{0, 0}));
}

struct Case {
  int64_t B = 1, Tq = 0, Tk = 0, Hq = 2, Hkv = 1, D = 64;
  DType in = DType::bf16, out = DType::f32;
  AttentionOptions opts{};
  std::vector<int32_t> cu_q{}, cu_k{};  // packed (varlen) when cu_q is not empty
  int64_t token_pad = 0;
  float v_mean = 0.f;  // an offset on V makes a wrongly included or excluded key move the output by ~mean / Tk
  std::vector<float> sinks{}, slopes{};
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "B=" << c.B << " Tq=" << c.Tq << " Tk=" << c.Tk << " Hq=" << c.Hq << " Hkv=" << c.Hkv << " D=" << c.D
    << " in=" << dtype_name(c.in) << " out=" << dtype_name(c.out) << " causal=" << c.opts.causal
    << " window=" << c.opts.window << " softcap=" << c.opts.softcap << " sinks=" << !c.sinks.empty()
    << " alibi=" << !c.slopes.empty() << " pad=" << c.token_pad << " v_mean=" << c.v_mean << " cu_q=";
  for (int32_t x : c.cu_q) s << x << ",";
  s << " cu_k=";
  for (int32_t x : c.cu_k) s << x << ",";
  return s.str();
}

// Worst error allowed against the double reference: the GPU test's (prefill_cuda_test.cc), because the error
// has the same sources here. P is rounded to the input dtype before P V, as in every FlashAttention (~2^-9
// relative on each weight in bf16, 2^-11 in f16), and a bf16 / f16 output adds its own rounding; the emulated
// MMA and exp2 are, if anything, more exact than the hardware's.
struct Tolerance {
  double max_abs, rel_rms;
};
Tolerance tolerance(DType in, DType out) {
  if (out == DType::bf16) return {2e-2, 6e-3};
  if (in == DType::bf16) return {8e-3, 4e-3};
  return out == DType::f32 ? Tolerance{2e-3, 1e-3} : Tolerance{5e-3, 2e-3};  // f16 in
}

// The case on one kernel against the reference. The Hopper kernel runs under both schedules, whose outputs must
// be the same bits: a schedule only changes which CTA computes an item. `multiprocessors`: as run's.
void check(Case c, uint64_t seed, PrefillPath path = PrefillPath::sm80, int multiprocessors = 0) {
  SCOPED_TRACE(describe(c) + " kernel=" + prefill_path_name(path));
  if (!c.sinks.empty()) c.opts.sinks = c.sinks.data();
  if (!c.slopes.empty()) c.opts.alibi_slopes = c.slopes.data();
  const bool packed = !c.cu_q.empty();
  const int64_t tq = packed ? c.cu_q.back() : c.Tq;
  const int64_t tk = packed ? (c.cu_k.empty() ? c.cu_q.back() : c.cu_k.back()) : c.Tk;
  auto shape = [&](int64_t T, int64_t H) {
    return packed ? std::vector<int64_t>{T, H, c.D} : std::vector<int64_t>{c.B, T, H, c.D};
  };
  DeviceTensor q(c.in, shape(tq, c.Hq), seed + 1, c.token_pad), k(c.in, shape(tk, c.Hkv), seed + 2, c.token_pad),
      v(c.in, shape(tk, c.Hkv), seed + 3, c.token_pad, c.v_mean);
  DeviceTensor out(c.out, shape(tq, c.Hq), 0, c.token_pad);
  testing::HostTensor ref(DType::f32, shape(tq, c.Hq), 0, 0.f);
  VarlenInfo varlen;
  if (packed) varlen = {c.cu_q.data(), c.cu_k.empty() ? nullptr : c.cu_k.data(), int64_t(c.cu_q.size()) - 1};
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, c.opts, varlen));

  const AttentionProblem p =
      make_prefill_problem(q.device_view(), k.device_view(), v.device_view(), out.device_view(), c.opts, varlen);
  ASSERT_NO_THROW(check_cuda_prefill(p));
  run(path, p, c.in, seed, PrefillSchedule::static_stride, multiprocessors);
  out.download();
  if (path == PrefillPath::sm90) {
    DeviceTensor dynamic_out(c.out, shape(tq, c.Hq), 0, c.token_pad);
    run(path,
        make_prefill_problem(q.device_view(), k.device_view(), v.device_view(), dynamic_out.device_view(), c.opts,
                             varlen),
        c.in, seed, PrefillSchedule::dynamic, multiprocessors);
    dynamic_out.download();
    EXPECT_TRUE(dynamic_out.host == out.host) << "the dynamic schedule's output differs from the static one's";
  }

  // Every element the shape covers is compared, in token order; the spare elements between tokens must keep
  // their NaN bytes.
  const Tolerance tol = tolerance(c.in, c.out);
  const int64_t per_token = c.Hq * c.D, tokens = ref.numel() / per_token, token_stride = per_token + c.token_pad;
  double max_err = 0, num = 0, den = 0;
  int64_t bad = 0, touched = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < per_token; ++e) {
      const double got = load_as_f32(out.host.data(), c.out, t * token_stride + e), want = ref.at(t * per_token + e);
      if (!std::isfinite(got)) {
        ++bad;
        continue;
      }
      max_err = std::max(max_err, std::fabs(got - want));
      num += (got - want) * (got - want);
      den += want * want;
    }
    for (int64_t e = per_token; e < token_stride; ++e)
      touched += !std::isnan(load_as_f32(out.host.data(), c.out, t * token_stride + e));
  }
  EXPECT_EQ(bad, 0) << "non-finite outputs (unwritten rows?)";
  EXPECT_EQ(touched, 0) << "wrote between tokens";
  EXPECT_LE(max_err, tol.max_abs * (1.0 + std::fabs(c.v_mean)));
  EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), tol.rel_rms);
}

// Ragged lengths that land on, just before and just after the 64-row query tile and the 64 / 32-key tiles.
int32_t ragged_length(std::mt19937_64& rng, int32_t top) {
  static const int32_t edges[] = {0, 1, 2, 7, 31, 32, 33, 63, 64, 65, 96, 127, 129};
  if (rng() % 3 == 0) return int32_t(rng() % uint64_t(top + 1));
  int32_t x;
  do x = edges[rng() % std::size(edges)];
  while (x > top);
  return x;
}

// head_dim: 0 draws 64, 128 or 256.
Case random_case(std::mt19937_64& rng, int64_t head_dim = 0) {
  Case c;
  c.D = std::vector<int64_t>{64, 128, 256}[rng() % 3];
  if (head_dim) c.D = head_dim;
  c.in = rng() % 2 ? DType::bf16 : DType::f16;
  c.out = std::vector<DType>{DType::f32, DType::f32, DType::bf16, DType::f16}[rng() % 4];
  const int64_t group = std::vector<int64_t>{1, 2, 4}[rng() % 3];
  c.Hkv = 1 + int64_t(rng() % 2);
  c.Hq = c.Hkv * group;
  c.opts.causal = rng() % 4 != 0;
  if (rng() % 3 == 0) c.opts.window = 1 + int64_t(rng() % 80);
  if (rng() % 4 == 0) c.opts.softcap = 2.f + float(rng() % 30);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  if (rng() % 3 == 0)
    for (int64_t h = 0; h < c.Hq; ++h) c.sinks.push_back(3.f * unit(rng));
  if (rng() % 4 == 0)
    for (int64_t h = 0; h < c.Hq; ++h) c.slopes.push_back(0.1f * std::fabs(unit(rng)));
  if (rng() % 4 == 0) c.v_mean = 3.f;
  // Key tiles cost the emulator most: fewer keys at D = 256.
  const int32_t top = c.D == 256 ? 70 : 140;
  if (rng() % 2) {
    const int n = 1 + int(rng() % 4);
    const bool more_keys = rng() % 2;
    c.cu_q = {0};
    if (more_keys) c.cu_k = {0};
    for (int i = 0; i < n; ++i) {
      const int32_t lq = ragged_length(rng, top / 2);
      c.cu_q.push_back(c.cu_q.back() + lq);
      if (more_keys) c.cu_k.push_back(c.cu_k.back() + lq + ragged_length(rng, top / 2));
    }
  } else {
    c.B = 1 + int64_t(rng() % 2);
    c.Tk = 1 + ragged_length(rng, top - 1);
    c.Tq = rng() % 3 == 0 ? 1 + int64_t(rng() % uint64_t(c.Tk)) : c.Tk;
    if (rng() % 4 == 0) c.token_pad = 8 * int64_t(1 + rng() % 3);
  }
  return c;
}

TEST(EmulatedPrefill, MatchesReferenceOnRandomCases) {
  std::mt19937_64 rng(20240607);
  for (int i = 0; i < 40; ++i) check(random_case(rng), 1000 + uint64_t(i));
}

// The band edges: windows just around the key tile, with queries at the end of longer keys.
TEST(EmulatedPrefill, MatchesReferenceAtWindowEdges) {
  for (int64_t w : {1, 31, 32, 33, 63, 64, 65}) {
    Case c{1, 70, 130, 2, 1, 64};
    c.opts.window = w;
    check(c, uint64_t(w));
  }
  Case c{1, 40, 70, 1, 1, 256};
  c.opts.window = 33;
  check(c, 99);
}

// Phi-3's head dim: 12 sixteen-byte pieces a row, which the loads spread over the CTA without a fixed column.
TEST(EmulatedPrefill, MatchesReferenceAtHeadDim96) {
  std::mt19937_64 rng(20261206);
  for (int i = 0; i < 16; ++i) check(random_case(rng, 96), 5000 + uint64_t(i));
  Case c{1, 70, 130, 4, 2, 96};  // several key tiles and both buffers, a window across a tile edge
  c.opts.causal = true;
  c.opts.window = 65;
  c.v_mean = 3.f;
  check(c, 5100);
}

// The Hopper kernel on the same kind of cases.
TEST(EmulatedPrefillSm90, MatchesReferenceOnRandomCases) {
  std::mt19937_64 rng(20261205);
  for (int i = 0; i < 30; ++i) check(random_case(rng), 2000 + uint64_t(i), PrefillPath::sm90);
}

// Windows shorter than the prompt and around the 128-key tile, queries at the end of longer keys; several
// 128-row query tiles and key tiles, so the ring's stages wrap, at every head dim's ring depth.
TEST(EmulatedPrefillSm90, MatchesReferenceAtWindowEdgesAndAcrossStages) {
  for (int64_t w : {1, 64, 127, 128, 129}) {
    Case c{1, 70, 300, 2, 1, 64};
    c.opts.window = w;
    c.opts.causal = w != 64;
    check(c, uint64_t(w), PrefillPath::sm90);
  }
  Case c{1, 200, 520, 4, 2, 128};
  c.opts.causal = true;
  c.v_mean = 3.f;
  check(c, 7, PrefillPath::sm90);
  Case wide{1, 150, 300, 2, 1, 256};  // 64-key tiles: the ring wraps twice
  wide.opts.window = 100;
  check(wide, 8, PrefillPath::sm90);
  // The deeper rings (4 stages at D = 64, 3 at 128) round more than twice, so each stage's barriers come back to
  // parity 0: a few queries at the end of many keys.
  Case deep64{1, 40, 1100, 2, 1, 64};  // 9 key tiles
  deep64.opts.causal = true;
  deep64.v_mean = 3.f;
  check(deep64, 9, PrefillPath::sm90);
  Case deep128{1, 30, 900, 2, 2, 128};  // 8 key tiles
  deep128.opts.causal = false;
  check(deep128, 10, PrefillPath::sm90);
}

// Ragged causal batches whose items differ in cost from 1 key tile to 5: 40 items on 2 CTAs, 24 on 3, so each
// CTA runs many items of unlike lengths back to back, under both schedules (check).
TEST(EmulatedPrefillSm90, MatchesReferenceOnAGridFarSmallerThanTheItems) {
  Case c;
  c.Hq = 4, c.Hkv = 2, c.D = 64;
  c.cu_q = {0, 300, 310, 500, 501, 760};
  c.cu_k = {0, 520, 530, 720, 721, 980};  // queries at the end of longer keys: up to 5 tiles of 128 keys
  c.opts.causal = true;
  c.v_mean = 3.f;
  check(c, 11, PrefillPath::sm90, 2);
  Case wide = c;
  wide.D = 128, wide.in = DType::f16, wide.out = DType::bf16;
  wide.cu_q = {0, 260, 261, 400}, wide.cu_k = {0, 390, 391, 530};
  check(wide, 12, PrefillPath::sm90, 3);
}

// One metadata copy launched twice, as a model's layers or a CUDA graph's replays launch it: the first launch's
// last CTA zeroes the counters, so the second hands out every item again (a counter left at its end would give
// each CTA its first item only, and the rest of the output would keep its NaN bytes).
TEST(EmulatedPrefillSm90, DynamicScheduleRelaunchesOverOneMetadataCopy) {
  Case c;
  c.Hq = 2, c.Hkv = 1, c.D = 64;
  c.cu_q = {0, 200, 330};
  c.opts.causal = true;
  const VarlenInfo varlen{c.cu_q.data(), nullptr, 2};
  DeviceTensor q(c.in, {330, c.Hq, c.D}, 1), k(c.in, {330, c.Hkv, c.D}, 2), v(c.in, {330, c.Hkv, c.D}, 3);
  DeviceTensor out(c.out, {330, c.Hq, c.D}, 0);
  const AttentionProblem p =
      make_prefill_problem(q.device_view(), k.device_view(), v.device_view(), out.device_view(), c.opts, varlen);
  const Sm90Launch launch(p, 2);
  ASSERT_EQ(launch.plan.items, 8);  // two 128-row query tiles per sequence, two heads: 4 items past the grid's 2
  std::vector<std::vector<uint8_t>> outputs;
  for (int i = 0; i < 2; ++i) {
    std::fill(out.host.begin(), out.host.end(), uint8_t(0xFF));
    out.upload();
    launch.run(PrefillSchedule::dynamic, c.in, c.D);
    EXPECT_EQ(launch.counters(), (std::array<uint32_t, 2>{0, 0})) << "launch " << i;
    out.download();
    int64_t unwritten = 0;
    for (int64_t e = 0; e < out.view.numel(); ++e) unwritten += std::isnan(load_as_f32(out.host.data(), c.out, e));
    EXPECT_EQ(unwritten, 0) << "launch " << i;
    outputs.push_back(out.host);
  }
  EXPECT_TRUE(outputs[0] == outputs[1]);
}

// Two sequences of 16 bf16 tokens, 4 heads of D, q, k, v and o all viewing `bytes` (at least 2 * 16 * 4 * D * 2
// of them): what the path choice and the plans read of a problem.
AttentionProblem bf16_problem(std::vector<uint8_t>& bytes, int64_t D) {
  TensorView q;
  q.dtype = DType::bf16;
  q.ndim = 4;
  q.shape = {2, 16, 4, D};
  q.strides = {16 * 4 * D, 4 * D, D, 1};
  q.data = bytes.data();
  return make_prefill_problem(q, q, q, q, {}, {});
}

TEST(PrefillPathChoice, HopperWhenCoveredElseSm80) {
  std::vector<uint8_t> bytes(size_t(2) * 16 * 4 * 256 * 2);
  auto problem = [&](int64_t D) { return bf16_problem(bytes, D); };
  EXPECT_EQ(choose_prefill_path(problem(128), 9, nullptr), PrefillPath::sm90);
  EXPECT_EQ(choose_prefill_path(problem(64), 9, ""), PrefillPath::sm90);
  EXPECT_EQ(choose_prefill_path(problem(128), 9, "sm80"), PrefillPath::sm80);
  EXPECT_EQ(choose_prefill_path(problem(128), 8, nullptr), PrefillPath::sm80);
  EXPECT_EQ(choose_prefill_path(problem(128), 10, nullptr), PrefillPath::sm80);  // sm_90a code is sm_90's only
  EXPECT_EQ(choose_prefill_path(problem(256), 9, nullptr), PrefillPath::sm90);
  EXPECT_EQ(choose_prefill_path(problem(256), 8, nullptr), PrefillPath::sm80);
  // Head dim 96 is not whole 64-column boxes: Hopper runs the sm_80 kernel for it.
  EXPECT_STREQ(sm90_prefill_gap(problem(96)), "head_dim D is not 64, 128 or 256");
  EXPECT_EQ(choose_prefill_path(problem(96), 9, nullptr), PrefillPath::sm80);
  // Batches whose stride is not a whole number of tokens cannot be TMA coordinates: the sm_80 kernel takes them.
  AttentionProblem padded = problem(64);
  padded.seqs[1].q_offset += 8;
  EXPECT_STREQ(sm90_prefill_gap(padded),
               "a sequence does not start at a whole token (batch stride not a multiple of the token stride)");
  EXPECT_EQ(choose_prefill_path(padded, 9, nullptr), PrefillPath::sm80);
}

// The Hopper plan's persistent grid: one CTA per multiprocessor, fewer when there are fewer items.
TEST(PrefillSm90Plan, PersistentGridIsAtMostOneCtaPerMultiprocessor) {
  std::vector<uint8_t> bytes(size_t(2) * 16 * 4 * 128 * 2);
  auto problem = [&](int64_t D) { return bf16_problem(bytes, D); };
  // 2 sequences of 16 rows, one 128-row tile each, times 4 heads.
  const PrefillSm90Plan plan = plan_prefill_sm90(problem(128), 132);
  EXPECT_EQ(plan.items, 8);
  EXPECT_EQ(plan.ctas, 8u);
  EXPECT_EQ(plan_prefill_sm90(problem(128), 3).ctas, 3u);
  EXPECT_EQ(plan_prefill_sm90(problem(128), 0).ctas, 1u);
  // The dynamic schedule's two counters close the metadata, 8-byte aligned, uploaded as zeros.
  EXPECT_EQ(plan.schedule_at % 8, 0u);
  EXPECT_GE(plan.schedule_at, plan.launch.slopes_at);
  ASSERT_EQ(plan.launch.metadata.size(), plan.schedule_at + 8);
  for (size_t i = plan.schedule_at; i < plan.launch.metadata.size(); ++i) EXPECT_EQ(plan.launch.metadata[i], 0) << i;
}

TEST(PrefillSm90Plan, ScheduleIsStaticUnlessDynamicIsAsked) {
  EXPECT_EQ(choose_prefill_schedule(nullptr), PrefillSchedule::static_stride);
  EXPECT_EQ(choose_prefill_schedule(""), PrefillSchedule::static_stride);
  EXPECT_EQ(choose_prefill_schedule("static"), PrefillSchedule::static_stride);
  EXPECT_EQ(choose_prefill_schedule("dynamic"), PrefillSchedule::dynamic);
  EXPECT_STREQ(prefill_schedule_name(PrefillSchedule::static_stride), "static");
  EXPECT_STREQ(prefill_schedule_name(PrefillSchedule::dynamic), "dynamic");
  for (const char* bad : {"Dynamic", "stat", "sm80", "dynamic "}) {
    try {
      choose_prefill_schedule(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("ATTNZOO_CUDA_PREFILL_SCHEDULE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnzoo
