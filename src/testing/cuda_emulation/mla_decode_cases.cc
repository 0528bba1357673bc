// The CUDA MLA decode's kernels (mla_decode_kernel.cuh: absorb, attend, merge, expand) and launch plan run under
// the CTA emulator against the double-precision reference (the naive form): one or two head groups, ranks 64 to
// 512, rope dims 0 to 64, paged caches over shuffled blocks (NaN in every row no sequence owns, -1 in the table
// past each sequence's last block, block sizes 16 and 64) and contiguous ones, ragged lengths down to 1,
// bf16 / f16 / f32 caches, queries and weights, and plans with and without split contexts, the expand reading its
// weights in 16-byte pieces (and at odd ranks an element a lane: which rows allow the pieces); and the GPU runner's
// per-token rows (models/cuda/mla_rows_plan.h), several rows over one sequence's blocks, each cut at its position;
// half of them with the plan's metadata and scratch in separate buffers and the tensors bound at launch, as a model
// step's MLA layers share one plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/softmax/cuda/mla_decode_cuda.h"
#include "kernels/softmax/cuda/mla_decode_kernel.cuh"
#include "kernels/softmax/cuda/mla_decode_launch_plan.h"
#include "kernels/softmax/cuda/mla_decode_mma.cuh"
#include "kernels/softmax/mla_problem.h"
#include "models/cuda/mla_rows_plan.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_mla;
using cuda_linear::Elem;
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;
using testing::HostTensor;

template <class Elem>
void attend_mma(const MlaDecodeParams& params, unsigned char* s) {
  switch (mla_mma_blocks_per_warp(params.r)) {
    case 2: return mla_attend_mma<Elem, 2>(params, s);
    case 4: return mla_attend_mma<Elem, 4>(params, s);
    case 8: return mla_attend_mma<Elem, 8>(params, s);
    default: return mla_attend_mma<Elem, 16>(params, s);
  }
}

// mla_decode.cu's four launches, on the emulator.
void launch_all(const MlaLaunchPlan& plan, const MlaDecodeParams& params) {
  const unsigned H = unsigned(params.H);
  cuda_emulation::launch(dim3(H, plan.batch_groups), kThreads, size_t(mla_rows_smem_bytes(params.dn)),
                         [&](unsigned char* smem) { mla_absorb(params, smem); });
  const int64_t L = params.r + params.dr;
  const size_t smem = size_t(plan.tensor_cores ? mla_attend_mma_smem_bytes(L) : mla_attend_smem_bytes(L));
  cuda_emulation::launch(dim3(unsigned(plan.work.size()), plan.head_groups), kThreads, smem,
                         [&](unsigned char* s) {
                           if (plan.tensor_cores) {
                             if (params.latent_type == Elem::bf16) return attend_mma<__nv_bfloat16>(params, s);
                             return attend_mma<__half>(params, s);
                           }
                           switch (mla_cols_per_thread(params.r)) {
                             case 1: return mla_attend<1>(params, s);
                             case 2: return mla_attend<2>(params, s);
                             default: return mla_attend<4>(params, s);
                           }
                         });
  if (!plan.merges.empty())
    cuda_emulation::launch(dim3(unsigned(plan.merges.size()), H), kThreads, 0,
                           [&](unsigned char*) { mla_merge(params); });
  const bool wide = mla_expand_is_wide(params);
  cuda_emulation::launch(dim3(H, plan.batch_groups), kThreads, size_t(mla_rows_smem_bytes(params.r)),
                         [&](unsigned char* smem) {
                           if (wide) return mla_expand<true>(params, smem);
                           mla_expand<false>(params, smem);
                         });
}

struct Case {
  int64_t H = 16, dn = 32, dr = 32, dv = 32, r = 64;
  std::vector<int32_t> lens;  // cache_seqlens
  int64_t block_size = 16;    // 0: contiguous cache
  DType cache = DType::bf16, q = DType::bf16, w = DType::bf16, out = DType::f32;
  int64_t slots = 1 << 20;    // resident attention CTAs the plan may fill
  int64_t min_chunk = kMinChunk;
  int64_t pad = 0;            // spare elements after each sequence's q and out rows: batch strides past the shape
  bool scalar = false;        // the scalar attention even where the tensor cores could run
  // Non-empty: `lens` are the sequences' cached lengths after a runner step that brought these many new tokens
  // each; the kernel runs the step's per-token rows (paged caches only).
  std::vector<int32_t> new_tokens;
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "H=" << c.H << " dn=" << c.dn << " dr=" << c.dr << " dv=" << c.dv << " r=" << c.r << " bs=" << c.block_size
    << " cache=" << dtype_name(c.cache) << " q=" << dtype_name(c.q) << " w=" << dtype_name(c.w)
    << " out=" << dtype_name(c.out) << " slots=" << c.slots << " min_chunk=" << c.min_chunk << " pad=" << c.pad
    << " scalar=" << c.scalar << " lens=";
  for (int32_t l : c.lens) s << l << ",";
  s << " new_tokens=";
  for (int32_t n : c.new_tokens) s << n << ",";
  return s.str();
}

// Error allowed relative to the largest |output|. The scalar attention runs every product and sum in f32 (the
// inputs are the reference's own bf16 / f16 values): f32 rounding over sums of a few hundred terms. The tensor
// cores take q_lat and the softmax weights rounded to the cache's type (2^-9 relative for bf16, 2^-11 for f16).
// A bf16 / f16 output adds its own rounding.
double tolerance(const Case& c, bool tensor_cores) {
  const double compute = !tensor_cores ? 1e-5 : c.cache == DType::bf16 ? 4e-3 : 1e-3;
  if (c.out == DType::bf16) return compute + 5e-3;
  if (c.out == DType::f16) return compute + 7e-4;
  return compute;
}

// What a case ran: whether the plan split a sequence (and so ran the merge kernel), whether the expand read its
// weights in 16-byte pieces.
struct Ran {
  bool split, wide;
};
Ran check(const Case& c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  const int64_t L = c.r + c.dr;
  const testing::LatentTestCache lc = testing::latent_test_cache(c.cache, c.lens, L, c.block_size, seed);
  const HostTensor& latent = lc.latent;
  LatentCacheView cache = lc.view(c.lens);
  MlaRowsPlan rows;
  if (!c.new_tokens.empty()) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : c.new_tokens) cu.push_back(cu.back() + n);
    rows = plan_mla_rows(cu, c.lens, lc.table, lc.max_blocks);
    cache.cache_seqlens = rows.cache_seqlens.data();
    cache.block_table = rows.block_table.data();
  }
  const int64_t B = c.new_tokens.empty() ? int64_t(c.lens.size()) : int64_t(rows.cache_seqlens.size());

  // W ~ N(0, r^-1/2) keeps the absorbed scores O(1).
  const HostTensor w(c.w, {c.H * (c.dn + c.dv), c.r}, seed + 2, 1.f / std::sqrt(float(c.r)));
  DeviceTensor q(c.q, {B, 1, c.H, c.dn + c.dr}, seed + 3, c.pad), out(c.out, {B, 1, c.H, c.dv}, 0, c.pad);
  HostTensor ref(DType::f32, {B, 1, c.H, c.dv}, 0, 0.f);
  mla_decode_reference(q.view, cache, {w.view, c.H, c.dn, c.dr, c.dv, c.r}, ref.view, {});

  const DeviceTensor dw(w.view, w.bytes.size()), dlat(latent.view, latent.bytes.size());
  LatentCacheView device_cache = cache;
  device_cache.latent = dlat.device_view();
  const MlaProblem p = make_mla_cache_problem(q.device_view(), device_cache,
                                              {dw.device_view(), c.H, c.dn, c.dr, c.dv, c.r}, out.device_view(),
                                              {}, {});
  EXPECT_NO_THROW(check_cuda_mla_decode(p, false));

  MlaLaunchPlan plan = plan_mla_decode_launch(p, c.slots, c.min_chunk);
  EXPECT_EQ(plan.tensor_cores, c.cache != DType::f32 && c.r % 64 == 0 && c.dr % 16 == 0);
  if (c.scalar) plan.tensor_cores = false;
  DeviceMemory buffer(plan.device_bytes), scratch(plan.device_bytes - plan.metadata.size() + 1);
  std::memcpy(buffer.data(), plan.metadata.data(), plan.metadata.size());
  // Odd seeds run the plan as a model step does (launch_prepared_mla_decode_cuda): metadata and scratch in buffers
  // of their own, the tensors' addresses bound at launch (the plan's own cleared, so nothing reads them).
  const bool elsewhere = seed % 2 == 1;
  if (elsewhere) plan.params.q = plan.params.w = plan.params.latent = plan.params.o = nullptr;
  const MlaDecodeParams params =
      elsewhere ? with_tensors(bind_device_buffers(plan, buffer.data(), scratch.data()), mla_tensors(p))
                : bind_device_buffer(plan, buffer.data());
  cuda_emulation::seed_schedule(seed);
  launch_all(plan, params);
  out.download();

  double err = 0, top = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const int64_t at = i / (c.H * c.dv) * out.view.strides[0] + i % (c.H * c.dv);
    const double got = load_as_f32(out.host.data(), c.out, at), want = ref.at(i);
    err = std::isfinite(got) ? std::max(err, std::fabs(got - want)) : INFINITY;
    top = std::max(top, std::fabs(want));
  }
  EXPECT_GT(top, 0.0);
  EXPECT_LE(err, tolerance(c, plan.tensor_cores) * top) << "largest |output| " << top;
  return {!plan.merges.empty(), mla_expand_is_wide(params)};
}

Case random_case(std::mt19937_64& rng, bool split) {
  Case c;
  c.H = rng() % 2 ? 16 : 32;
  c.r = rng() % 2 ? 64 : 128;
  c.dr = std::vector<int64_t>{0, 32, 64}[rng() % 3];
  c.dn = std::vector<int64_t>{16, 32}[rng() % 2];
  c.dv = std::vector<int64_t>{16, 24, 32}[rng() % 3];
  c.block_size = std::vector<int64_t>{0, 16, 64}[rng() % 3];
  c.q = rng() % 2 ? DType::bf16 : DType::f16;
  c.cache = std::vector<DType>{c.q, DType::bf16, DType::f16, DType::f32}[rng() % 4];
  c.w = std::vector<DType>{c.q, DType::f32}[rng() % 2];
  c.out = std::vector<DType>{DType::f32, DType::f32, DType::bf16, DType::f16}[rng() % 4];
  c.pad = rng() % 3 == 0 ? 8 : 0;
  c.scalar = rng() % 4 == 0;
  const int n = 1 + int(rng() % 3);
  for (int i = 0; i < n; ++i) {
    int32_t len = 1 + int32_t(rng() % (split ? 150 : 80));
    if (rng() % 3 == 0) len = std::vector<int32_t>{1, 15, 16, 17, 64, 65}[rng() % 6];
    c.lens.push_back(len);
  }
  if (split) {
    c.lens[0] = std::max<int32_t>(c.lens[0], 80 + int32_t(rng() % 90));  // past one 64-row tile
    c.min_chunk = rng() % 2 ? 16 : 32;  // short chunks: the plan cuts the long sequence to fill spare slots
    c.slots = 24 + int64_t(rng() % 40);
  }
  return c;
}

TEST(EmulatedMlaDecode, MatchesReferenceOnRandomCases) {
  std::mt19937_64 rng(91);
  int wide = 0;
  for (int i = 0; i < 24; ++i) wide += check(random_case(rng, false), 5000 + uint64_t(i)).wide;
  EXPECT_EQ(wide, 24) << "ranks 64 and 128 over aligned weights: every expand reads 16-byte pieces";
}

// Spare slots: the long sequences are cut into chunks whose partial results the merge kernel combines.
TEST(EmulatedMlaDecode, MatchesReferenceWhenSplit) {
  std::mt19937_64 rng(92);
  int split = 0;
  for (int i = 0; i < 16; ++i) split += check(random_case(rng, true), 6000 + uint64_t(i)).split;
  EXPECT_GE(split, 13) << "cases whose plan split a sequence";
}

// DeepSeek's rank and rope dims (r = 512: four accumulator columns per thread, sixteen value blocks per warp)
// on a short context, split and not, on the tensor cores and the scalar path.
TEST(EmulatedMlaDecode, DeepSeekRankShortContext) {
  Case c;
  c.H = 16, c.dn = 32, c.dr = 64, c.dv = 32, c.r = 512;
  c.lens = {70, 1, 23};
  c.block_size = 16;
  EXPECT_TRUE(check(c, 7001).wide);
  c.min_chunk = 16, c.slots = 8;
  c.cache = c.q = c.w = DType::f16;
  c.block_size = 64;
  EXPECT_TRUE(check(c, 7002).split);
  c.scalar = true;
  EXPECT_TRUE(check(c, 7003).split);
}

// Rank 256 (two columns per thread; eight value blocks per warp on the tensor cores), a head count that leaves
// the second head group partly empty; f32 throughout, then bf16 and split.
TEST(EmulatedMlaDecode, PartialHeadGroupAndRank256) {
  Case c;
  c.H = 20, c.dn = 16, c.dr = 16, c.dv = 16, c.r = 256;
  c.lens = {33, 7};
  c.cache = c.q = c.w = DType::f32;
  check(c, 7004);
  c.cache = c.q = c.w = DType::bf16;  // the tensor cores: eight value blocks per warp, heads 16..19 of 32 rows
  c.min_chunk = 16, c.slots = 16;
  c.lens = {130, 7};
  EXPECT_TRUE(check(c, 7005).split);
}

// Dims that are no multiple of the absorb's four weights in flight (dn = 18), nor of the expand's 16-byte pieces
// or its four rows a warp (r = 66, dv = 10: the expand loads an element a lane, the scalar attention), in bf16 and
// f32 weights.
TEST(EmulatedMlaDecode, OddDims) {
  Case c;
  c.H = 4, c.dn = 18, c.dr = 6, c.dv = 10, c.r = 66;
  c.lens = {9, 21};
  c.cache = c.q = c.w = DType::bf16;
  EXPECT_FALSE(check(c, 7009).wide);
  c.w = DType::f32;
  EXPECT_FALSE(check(c, 7010).wide);
}

// The expand's 16-byte pieces need every W_UV row to start on a 16-byte boundary and r to fill whole pieces: eight
// 16-bit or four f32 weights.
TEST(EmulatedMlaDecode, ExpandReadsSixteenBytePiecesOnlyWhereRowsAllowThem) {
  alignas(16) static const unsigned char weights[32] = {};
  MlaDecodeParams p{};
  p.w = weights, p.w_type = Elem::bf16, p.w_row = 512, p.r = 512;
  EXPECT_TRUE(mla_expand_is_wide(p));
  p.w = weights + 8;  // 8-byte aligned only
  EXPECT_FALSE(mla_expand_is_wide(p));
  p.w = weights, p.w_row = 516;  // rows past the first start 8 bytes off
  EXPECT_FALSE(mla_expand_is_wide(p));
  p.w_row = p.r = 68;  // aligned rows, but r ends in half a piece
  EXPECT_FALSE(mla_expand_is_wide(p));
  p.w_type = Elem::f32;  // four f32 weights a piece: 68 is whole pieces
  EXPECT_TRUE(mla_expand_is_wide(p));
  p.w_row = p.r = 66;
  EXPECT_FALSE(mla_expand_is_wide(p));
}

// The GPU runner's MLA step (device_mla.h) at the tiny DeepSeek-V3 test's shape (4 heads: one partly empty head
// group): a fresh prefill of 12, a decode token after 39 cached, 3 tokens after 6: 16 rows, those of one sequence
// over the same blocks. Then the F32 DeepSeek-V2-Lite test's (rank 128, f32 kv_b_proj): two fresh prefills, and a
// few rows over long contexts, split.
TEST(EmulatedMlaDecode, TheRunnersPerTokenRows) {
  Case c;
  c.H = 4, c.dn = 32, c.dr = 32, c.dv = 32, c.r = 64;
  c.lens = {12, 40, 9};
  c.new_tokens = {12, 1, 3};
  c.out = DType::bf16;
  check(c, 7006);
  c.r = 128;
  c.w = DType::f32;
  c.lens = {70, 19};
  c.new_tokens = {70, 19};
  check(c, 7007);
  c.new_tokens = {2, 1};
  c.min_chunk = 16, c.slots = 40;
  EXPECT_TRUE(check(c, 7008).split);
}

}  // namespace
}  // namespace attnzoo
