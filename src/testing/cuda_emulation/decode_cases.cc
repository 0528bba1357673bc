// The CUDA decode's kernels (decode_kernel.cuh: chunks and the merge of split sequences) and split-KV launch plan
// run under the CTA emulator against the double-precision reference: seeded random cases over paged caches
// (shuffled block tables, -1 past each sequence's last block, block sizes 16 and 64) and contiguous ones,
// bf16 / f16 / int8 / fp8 caches, head dims 64 / 96 / 128 / 256, 1 to 8 new tokens, GQA / MQA, causal, windows,
// softcap, sinks, ALiBi, and CTA slots to spare, so that sequences past 256 keys are split and merged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/softmax/cuda/decode_cuda.h"
#include "kernels/softmax/cuda/decode_kernel.cuh"
#include "kernels/softmax/cuda/decode_launch_plan.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/kv_quant.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_decode;
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;
using cuda_emulation::on_device;
using testing::HostTensor;

// decode.cu's two kernels, launched on the emulator.
template <class Elem, class KvT, int D, int M>
void launch(const DecodeLaunchPlan& plan, const DecodeParams& params) {
  cuda_emulation::launch(dim3(unsigned(plan.work.size()), plan.row_groups), kThreads,
                         ChunkShape<D, M, KvT>::kSmemBytes,
                         [&](unsigned char* smem) { decode_chunk<Elem, KvT, D, M>(params, smem); });
  if (plan.merges.empty()) return;
  cuda_emulation::launch(dim3(unsigned(plan.merges.size()), unsigned(params.rows)), kThreads, 0, [&](unsigned char*) {
    switch (params.out_type) {
      case OutType::f32: merge_row<float>(params); break;
      case OutType::bf16: merge_row<__nv_bfloat16>(params); break;
      case OutType::f16: merge_row<__half>(params); break;
    }
  });
}

template <class Elem, class KvT>
void launch_for_dim(const DecodeLaunchPlan& plan, const DecodeParams& params) {
  const bool small = rows_per_cta(params.D, params.rows) == 16;
  switch (params.D) {
    case 64: return small ? launch<Elem, KvT, 64, 1>(plan, params) : launch<Elem, KvT, 64, 4>(plan, params);
    case 96: return launch<Elem, KvT, 96, 1>(plan, params);  // rows_per_cta: always 16
    case 128: return small ? launch<Elem, KvT, 128, 1>(plan, params) : launch<Elem, KvT, 128, 4>(plan, params);
    default: return launch<Elem, KvT, 256, 4>(plan, params);
  }
}

template <class Elem>
void launch_for_cache(DType kv, const DecodeLaunchPlan& plan, const DecodeParams& params) {
  switch (kv) {
    case DType::i8: return launch_for_dim<Elem, int8_t>(plan, params);
    case DType::f8_e4m3: return launch_for_dim<Elem, Fp8Byte>(plan, params);
    default: return launch_for_dim<Elem, Elem>(plan, params);
  }
}

struct Case {
  int64_t Tq = 1, Hq = 2, Hkv = 1, D = 64;
  std::vector<int32_t> lens;  // cache_seqlens
  int64_t block_size = 0;     // 0: contiguous cache
  DType kv = DType::bf16, q = DType::bf16, out = DType::f32;
  AttentionOptions opts{};
  std::vector<float> sinks{}, slopes{};
  int64_t slots = 132;  // resident CTAs the plan may fill
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "Tq=" << c.Tq << " Hq=" << c.Hq << " Hkv=" << c.Hkv << " D=" << c.D << " bs=" << c.block_size
    << " kv=" << dtype_name(c.kv) << " q=" << dtype_name(c.q) << " out=" << dtype_name(c.out)
    << " causal=" << c.opts.causal << " window=" << c.opts.window << " softcap=" << c.opts.softcap
    << " sinks=" << !c.sinks.empty() << " alibi=" << !c.slopes.empty() << " slots=" << c.slots << " lens=";
  for (int32_t l : c.lens) s << l << ",";
  return s.str();
}

using testing::CacheTensor;

CacheTensor make_cache_tensor(const Case& c, int64_t B, int64_t S, uint64_t seed) {
  return testing::make_cache_tensor(c.kv, B, S, c.Hkv, c.D, seed);
}

// Error allowed relative to max(1, |largest output|): the GPU test's (decode_cuda_test.cc), for the same
// reasons. The tensor cores take the softmax weights P in q's dtype (relative rounding 2^-9 for bf16, 2^-11 for
// f16), which bounds the kernel's error; a bf16 / f16 output adds its own rounding.
double tolerance(const Case& c) {
  const double compute = c.q == DType::bf16 ? 4e-3 : 1.5e-3;
  if (c.out == DType::bf16) return 2e-2;
  if (c.out == DType::f16) return compute + 4e-3;
  return compute;
}

// Returns whether the plan split a sequence (and so ran the merge kernel). With `plan_elsewhere`, the plan is made
// for another layer's tensors (same shapes and strides, other bytes) and launched with this one's
// (cuda_decode::with_tensors), as a model step's layers share one plan: any address left from the planning
// layer reads its scrambled cache or writes its output instead of ours.
bool check(Case c, uint64_t seed, bool plan_elsewhere = false) {
  SCOPED_TRACE(describe(c));
  if (!c.sinks.empty()) c.opts.sinks = c.sinks.data();
  if (!c.slopes.empty()) c.opts.alibi_slopes = c.slopes.data();
  const int64_t B = int64_t(c.lens.size());
  const int64_t S = *std::max_element(c.lens.begin(), c.lens.end()) + 3;
  const int64_t block_size = c.block_size ? c.block_size : S, max_blocks = (S + block_size - 1) / block_size;
  const int64_t num_blocks = B * max_blocks + 2;
  CacheTensor k = make_cache_tensor(c, B, S, seed + 1), v = make_cache_tensor(c, B, S, seed + 2);
  std::vector<int32_t> table;
  if (c.block_size) {
    table = testing::shuffled_block_table(B, max_blocks, num_blocks, seed);
    for (CacheTensor* t : {&k, &v}) {
      t->data.emplace(testing::to_paged(*t->data, table, max_blocks, block_size, num_blocks));
      if (t->scale) t->scale.emplace(testing::to_paged(*t->scale, table, max_blocks, block_size, num_blocks));
    }
    // Entries past a sequence's last block are padding a kernel must never follow.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = (c.lens[size_t(b)] + block_size - 1) / block_size; i < max_blocks; ++i)
        table[size_t(b * max_blocks + i)] = -1;
  }
  KvCacheView cache{k.data->view, v.data->view, c.lens.data(), table.empty() ? nullptr : table.data(),
                    table.empty() ? 0 : max_blocks};
  if (k.scale) cache.k_scale = k.scale->view, cache.v_scale = v.scale->view;

  DeviceTensor q(c.q, {B, c.Tq, c.Hq, c.D}, seed + 3), out(c.out, {B, c.Tq, c.Hq, c.D}, 0);
  HostTensor ref(DType::f32, {B, c.Tq, c.Hq, c.D}, 0, 0.f);
  attention_decode_reference(q.view, cache, ref.view, c.opts);

  const DeviceTensor dk = on_device(*k.data), dv = on_device(*v.data);
  std::optional<DeviceTensor> dks, dvs;
  if (k.scale) dks.emplace(k.scale->view, k.scale->bytes.size()), dvs.emplace(v.scale->view, v.scale->bytes.size());
  KvCacheView device_cache = cache;
  device_cache.k = dk.device_view(), device_cache.v = dv.device_view();
  if (dks) device_cache.k_scale = dks->device_view(), device_cache.v_scale = dvs->device_view();
  const DecodeProblem p = make_decode_problem(q.device_view(), device_cache, out.device_view(), c.opts);
  EXPECT_NO_THROW(check_cuda_decode(p));

  // The planning layer: scrambled copies of the caches and scales, its own q, an output nobody reads.
  auto scramble = [](DeviceTensor& t) {
    for (uint8_t& b : t.host) b ^= 0x5A;
    t.upload();
  };
  DeviceTensor other_k(dk.view, dk.host.size()), other_v(dv.view, dv.host.size());
  scramble(other_k), scramble(other_v);
  const DeviceTensor other_q(c.q, {B, c.Tq, c.Hq, c.D}, seed + 30), other_out(c.out, {B, c.Tq, c.Hq, c.D}, 0);
  std::optional<DeviceTensor> other_ks, other_vs;
  KvCacheView other_cache = device_cache;
  other_cache.k = other_k.device_view(), other_cache.v = other_v.device_view();
  if (dks) {
    other_ks.emplace(dks->view, dks->host.size()), other_vs.emplace(dvs->view, dvs->host.size());
    scramble(*other_ks), scramble(*other_vs);
    other_cache.k_scale = other_ks->device_view(), other_cache.v_scale = other_vs->device_view();
  }
  const DecodeProblem planned =
      plan_elsewhere ? make_decode_problem(other_q.device_view(), other_cache, other_out.device_view(), c.opts) : p;

  const int rows = rows_per_cta(p.D, p.rows());
  const DecodeLaunchPlan plan = plan_decode_launch(planned, p.D == 256 ? 32 : 64, rows, c.slots);
  // Planned elsewhere, as a model step does it: the metadata and the partial results in buffers of their own.
  DeviceMemory buffer(plan.device_bytes), partials(plan.device_bytes - plan.metadata.size() + 1);
  std::memcpy(buffer.data(), plan.metadata.data(), plan.metadata.size());
  const DecodeParams params =
      with_tensors(plan_elsewhere ? bind_device_buffers(plan, buffer.data(), partials.data())
                                  : bind_device_buffer(plan, buffer.data()),
                   decode_tensors(p));
  cuda_emulation::seed_schedule(seed);
  if (c.q == DType::bf16) launch_for_cache<__nv_bfloat16>(c.kv, plan, params);
  else launch_for_cache<__half>(c.kv, plan, params);
  out.download();

  double err = 0, top = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double got = load_as_f32(out.host.data(), c.out, i), want = ref.at(i);
    err = std::isfinite(got) ? std::max(err, std::fabs(got - want)) : INFINITY;
    top = std::max(top, std::fabs(want));
  }
  EXPECT_LE(err, tolerance(c) * std::max(1.0, top)) << "largest |output| " << top;
  return !plan.merges.empty();
}

// head_dim: 0 draws 64, 128 or 256.
Case random_case(std::mt19937_64& rng, bool split, int64_t head_dim = 0) {
  Case c;
  c.D = std::vector<int64_t>{64, 128, 256}[rng() % 3];
  if (head_dim) c.D = head_dim;
  c.Tq = 1 + int64_t(rng() % 8);
  const int64_t group = std::vector<int64_t>{1, 2, 4, 8}[rng() % 4];
  c.Hkv = 1 + int64_t(rng() % 2);
  c.Hq = c.Hkv * group;
  c.block_size = std::vector<int64_t>{0, 16, 64}[rng() % 3];
  c.q = rng() % 2 ? DType::bf16 : DType::f16;
  c.kv = std::vector<DType>{c.q, c.q, DType::i8, DType::f8_e4m3}[rng() % 4];
  c.out = std::vector<DType>{DType::f32, DType::f32, DType::bf16, DType::f16}[rng() % 4];
  c.opts.causal = rng() % 4 != 0;
  if (rng() % 3 == 0) c.opts.window = 1 + int64_t(rng() % 150);
  if (rng() % 4 == 0) c.opts.softcap = 2.f + float(rng() % 30);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  if (rng() % 3 == 0)
    for (int64_t h = 0; h < c.Hq; ++h) c.sinks.push_back(3.f * unit(rng));
  if (rng() % 4 == 0)
    for (int64_t h = 0; h < c.Hq; ++h) c.slopes.push_back(0.1f * std::fabs(unit(rng)));
  const int n = 1 + int(rng() % 3);
  for (int i = 0; i < n; ++i) {
    // At least Tq keys (the new tokens are in the cache); some just past a tile or block edge.
    const int32_t top = split ? 700 : 200;
    int32_t len = int32_t(c.Tq) + int32_t(rng() % uint64_t(top));
    if (rng() % 3 == 0) len = std::max<int32_t>(int32_t(c.Tq), std::vector<int32_t>{16, 17, 63, 64, 65, 257}[rng() % 6]);
    c.lens.push_back(len);
  }
  if (split) {
    c.lens[0] = std::max<int32_t>(c.lens[0], 300 + int32_t(rng() % 400));
    c.slots = 16 + int64_t(rng() % 48);  // spare slots: the plan cuts the long sequence to fill them
    if (c.opts.window > 0) c.opts.window += 300;  // wide enough to leave more than one chunk of keys
  }
  return c;
}

TEST(EmulatedDecode, MatchesReferenceOnRandomCases) {
  std::mt19937_64 rng(77);
  for (int i = 0; i < 30; ++i) check(random_case(rng, false), 2000 + uint64_t(i));
}

// Spare slots: the long sequences are cut into chunks whose partial results the merge kernel combines.
TEST(EmulatedDecode, MatchesReferenceWhenSplit) {
  std::mt19937_64 rng(78);
  int split = 0;
  for (int i = 0; i < 12; ++i) split += check(random_case(rng, true), 3000 + uint64_t(i));
  EXPECT_GE(split, 10) << "cases whose plan split a sequence";
}

// Phi-3's head dim, on every cache format: 12 sixteen-byte pieces a 16-bit row and 6 an 8-bit one, spread over
// the CTA without a fixed column; more than 16 rows (GQA x new tokens) take several 16-row groups.
TEST(EmulatedDecode, MatchesReferenceAtHeadDim96) {
  std::mt19937_64 rng(96);
  int split = 0, wide = 0;
  for (int i = 0; i < 16; ++i) {
    const Case c = random_case(rng, i % 3 == 2, 96);
    wide += c.Tq * (c.Hq / c.Hkv) > 16;
    split += check(c, 6000 + uint64_t(i));
  }
  for (DType kv : {DType::bf16, DType::i8, DType::f8_e4m3}) {
    Case c;
    c.D = 96, c.Tq = 8, c.Hq = 8, c.Hkv = 2, c.kv = kv, c.block_size = 16, c.lens = {70, 200};
    c.opts.causal = true;
    check(c, 6100 + uint64_t(kv));
  }
  EXPECT_GE(split, 3) << "cases whose plan split a sequence";
  EXPECT_GE(wide, 2) << "cases with more than one 16-row group";
}

// One plan, another layer's tensors: what launch_prepared_decode_cuda does for each layer of a model step.
TEST(EmulatedDecode, OnePlanServesAnotherLayersTensors) {
  std::mt19937_64 rng(79);
  int split = 0;
  for (int i = 0; i < 8; ++i) split += check(random_case(rng, i % 2 == 1), 4000 + uint64_t(i), /*plan_elsewhere=*/true);
  EXPECT_GE(split, 2) << "cases whose plan split a sequence";
}

}  // namespace
}  // namespace attnzoo
