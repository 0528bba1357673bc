// The MoE grouping's multi-CTA path (layers/cuda/moe_kernel.cuh: count_entries, scan_counts, scatter_entries) under
// the CTA emulator, against its CPU twin (a stable sort of the entries by expert, the offsets and the tile prefix
// counted on the host) and against the single-CTA group_entries on the same ids, bit for bit: skewed loads with
// idle experts, every entry on one expert, E = 1, 256 and 1024, counts on either side of the one-CTA threshold and
// of the CTAs' range boundaries, scans over several tiles of (expert, CTA) counts, and a prefill's 32k and 100k
// entries as moe_group_cuda plans them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "layers/cuda/moe_plan.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/moe_group_run.h"
#include "testing/random_routing.h"

namespace attnzoo {
namespace {
using namespace cuda_moe;
using cuda_emulation::DeviceMemory;

struct Grouped {
  std::vector<int32_t> offsets, tiles, source, dest;
};

// The grouping of `ids` by `plan`, its outputs starting as garbage (DeviceMemory's 0xA5 fill).
Grouped group(const std::vector<int32_t>& ids, int E, int tile_rows, GroupPlan plan, uint64_t seed) {
  const size_t n = ids.size();
  DeviceMemory d_ids(std::max<size_t>(n, 1) * 4), offsets(size_t(E + 1) * 4), tiles(size_t(E + 1) * 4),
      source(std::max<size_t>(n, 1) * 4), dest(std::max<size_t>(n, 1) * 4);
  std::copy(ids.begin(), ids.end(), reinterpret_cast<int32_t*>(d_ids.data()));
  auto i32 = [](const DeviceMemory& m) { return reinterpret_cast<int32_t*>(m.data()); };
  const GroupParams p{i32(d_ids), int(n), E, tile_rows, i32(offsets), i32(tiles), i32(source), i32(dest),
                      nullptr, 1, int(n)};
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::run_grouping(p, plan);
  auto out = [&](const DeviceMemory& m, size_t count) { return std::vector<int32_t>(i32(m), i32(m) + count); };
  return {out(offsets, size_t(E + 1)), out(tiles, size_t(E + 1)), out(source, n), out(dest, n)};
}

// The CPU twin: a stable sort by expert, each expert's rows and row tiles summed on the host.
Grouped cpu_grouping(const std::vector<int32_t>& ids, int E, int tile_rows) {
  Grouped g;
  g.source.resize(ids.size());
  std::iota(g.source.begin(), g.source.end(), 0);
  std::stable_sort(g.source.begin(), g.source.end(),
                   [&](int32_t a, int32_t b) { return ids[size_t(a)] < ids[size_t(b)]; });
  g.dest.resize(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) g.dest[size_t(g.source[r])] = int32_t(r);
  int32_t row = 0, tile = 0;
  for (int e = 0; e <= E; ++e) {
    g.offsets.push_back(row);
    g.tiles.push_back(tile);
    if (e == E) break;
    const int32_t count = int32_t(std::count(ids.begin(), ids.end(), e));
    row += count;
    tile += (count + tile_rows - 1) / tile_rows;
  }
  return g;
}

void expect_same(const Grouped& got, const Grouped& want, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.offsets, want.offsets);
  ASSERT_EQ(got.tiles, want.tiles);
  for (size_t r = 0; r < want.source.size(); ++r) ASSERT_EQ(got.source[r], want.source[r]) << "grouped row " << r;
  for (size_t i = 0; i < want.dest.size(); ++i) ASSERT_EQ(got.dest[i], want.dest[i]) << "entry " << i;
}

// The multi-CTA grouping by `plan` against the CPU twin and against the single CTA over the same ids.
void check(const std::vector<int32_t>& ids, int E, int tile_rows, GroupPlan plan, uint64_t seed) {
  SCOPED_TRACE("n " + std::to_string(ids.size()) + " E " + std::to_string(E) + " tile_rows " +
               std::to_string(tile_rows) + " ctas " + std::to_string(plan.ctas) + " range " +
               std::to_string(plan.range));
  ASSERT_GT(plan.ctas, 1) << "a multi-CTA case";
  ASSERT_EQ(plan.range % kGroupThreads, 0);
  ASSERT_LT(int64_t(plan.ctas - 1) * plan.range, int64_t(ids.size()));
  ASSERT_GE(int64_t(plan.ctas) * plan.range, int64_t(ids.size()));
  const Grouped multi = group(ids, E, tile_rows, plan, seed);
  expect_same(multi, cpu_grouping(ids, E, tile_rows), "against the stable sort");
  expect_same(multi, group(ids, E, tile_rows, {1, int(ids.size())}, seed + 1), "against the single CTA");
}

void check(const std::vector<int32_t>& ids, int E, int tile_rows, uint64_t seed) {
  check(ids, E, tile_rows, plan_group(int64_t(ids.size())), seed);
}

// n ids drawn with expert e's weight (e % 4 + 1)^2, every fifth expert (e % 5 == 3) idle when E > 1.
std::vector<int32_t> skewed_ids(int64_t n, int E, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> load(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) load[size_t(e)] = E > 1 && e % 5 == 3 ? 0.0 : double((e % 4 + 1) * (e % 4 + 1));
  std::discrete_distribution<int32_t> pick(load.begin(), load.end());
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

// A fixed plan of `range`-entry CTAs: many CTAs from few entries, so range boundaries fall where a case puts them.
GroupPlan ranges_of(int64_t n, int range) { return {int((n + range - 1) / range), range}; }

TEST(EmulatedMoeGroup, PlansWholeChunksUnderTheCtaCap) {
  EXPECT_EQ(plan_group(0).ctas, 1);
  EXPECT_EQ(plan_group(512).ctas, 1);  // a decode step of 64 tokens x top 8
  EXPECT_EQ(plan_group(kGroupOneCtaMax).ctas, 1);
  EXPECT_EQ(plan_group(kGroupOneCtaMax + 1).ctas, 3);
  EXPECT_EQ(plan_group(kGroupOneCtaMax + 1).range, kGroupRange);
  EXPECT_EQ(plan_group(4096 * 8).ctas, 32);  // a 4096-token prefill, top 8
  for (int64_t n : {int64_t(kGroupRange) * kGroupMaxCtas, int64_t(kGroupRange) * kGroupMaxCtas + 1,
                    int64_t(1) << 30, (int64_t(1) << 31) - 1}) {
    SCOPED_TRACE(n);
    const GroupPlan p = plan_group(n);
    EXPECT_LE(p.ctas, kGroupMaxCtas);
    EXPECT_EQ(p.range % kGroupThreads, 0);
    EXPECT_GE(p.range, kGroupRange);
    EXPECT_LT(int64_t(p.ctas - 1) * p.range, n);
    EXPECT_GE(int64_t(p.ctas) * p.range, n);
  }
  EXPECT_EQ(moe_group_scratch(512, 128), 0);
  EXPECT_EQ(moe_group_scratch(4096 * 8, 128), 128 * 32);
}

TEST(EmulatedMoeGroup, MatchesTheStableSortAndTheSingleCta) {
  // Either side of the one-CTA threshold and of the default range's boundaries (the last CTA a single entry).
  for (int64_t n : {kGroupOneCtaMax + 1, int64_t(3 * kGroupRange), int64_t(3 * kGroupRange + 1), int64_t(4095)})
    check(skewed_ids(n, 256, uint64_t(n)), 256, 64, uint64_t(n));
  check(skewed_ids(5000, 1, 1), 1, 128, 1);                 // E = 1: every entry on the one expert
  check(std::vector<int32_t>(3000, 17), 64, 64, 2);         // all on one expert of many, the rest empty
  check(std::vector<int32_t>(3000, 63), 64, 128, 3);        // ... the last one
  check(skewed_ids(4097, 1024, 4), 1024, 64, 4);            // E = 1024: most experts empty in each CTA
}

// Small ranges: CTA boundaries inside a handful of chunks, a CTA of one entry, and (expert, CTA) counts spanning
// several of the scan's tiles, so its carry between tiles counts.
TEST(EmulatedMoeGroup, RangeBoundariesAndLongScans) {
  for (int64_t n : {int64_t(511), int64_t(512), int64_t(513), int64_t(257)})
    check(skewed_ids(n, 8, uint64_t(n)), 8, 64, ranges_of(n, kGroupThreads), uint64_t(n));
  check(skewed_ids(1000, 3, 5), 3, 64, ranges_of(1000, 2 * kGroupThreads), 5);
  check(skewed_ids(9000, 1024, 6), 1024, 128, ranges_of(9000, kGroupThreads), 6);  // 36k counts: 5 scan tiles
  check(skewed_ids(6000, 256, 7), 256, 64, ranges_of(6000, kGroupThreads), 7);     // 6k counts: one partial tile
}

// A prefill's routings as the runner groups them (each token's top_k distinct experts): 4096 tokens x top 8 of 128
// (Qwen3-30B-A3B), 12800 tokens x top 8 of 256 (DeepSeek-V3's expert count, 100k entries).
TEST(EmulatedMoeGroup, PrefillRoutings) {
  uint64_t seed = 40;
  for (auto [T, E] : std::vector<std::pair<int64_t, int>>{{4096, 128}, {12800, 256}}) {
    std::mt19937_64 rng(seed);
    std::vector<double> load(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) load[size_t(e)] = e % 7 == 2 ? 0.0 : double(e % 3 + 1);
    const MoeRouting routing = testing::draw_routing(T, 8, load, rng);
    check(routing.experts, E, 128, seed++);
  }
}

}  // namespace
}  // namespace attnzoo
