// The tile grid must account for every visible (query, key) pair exactly once and mark full tiles only where
// every pair is visible; checked against a brute-force walk over MaskGeometry::visible.
#include "explain/tile_grid.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"
#include "kernels/softmax/block_mask.h"

namespace attnzoo::explain {
namespace {

void expect_consistent(int64_t Tq, int64_t Tk, const AttentionOptions& opts) {
  const TileGrid g = prefill_tile_grid(Tq, Tk, opts);
  const MaskGeometry mask = mask_geometry(opts);
  const int64_t offset = Tk - Tq;
  ASSERT_EQ(int64_t(g.visits.size()), g.num_q_blocks * g.num_k_tiles);
  ASSERT_EQ(int64_t(g.task_order.size()), g.num_q_blocks);
  for (int64_t qb = 0; qb < g.num_q_blocks; ++qb)
    for (int64_t kt = 0; kt < g.num_k_tiles; ++kt) {
      int64_t visible = 0, pairs = 0;
      for (int64_t i = qb * g.block_q; i < std::min(Tq, (qb + 1) * g.block_q); ++i)
        for (int64_t j = kt * g.block_k; j < std::min(Tk, (kt + 1) * g.block_k); ++j) {
          ++pairs;
          visible += mask.visible(i + offset, j);
        }
      const TileVisit v = g.at(qb, kt);
      SCOPED_TRACE("Tq=" + std::to_string(Tq) + " Tk=" + std::to_string(Tk) + " qb=" + std::to_string(qb) +
                   " kt=" + std::to_string(kt));
      if (visible == 0) {
        EXPECT_TRUE(v == TileVisit::outside_range || v == TileVisit::skipped || v == TileVisit::partial);
      } else {
        EXPECT_TRUE(v == TileVisit::full || v == TileVisit::partial);  // a visible pair is never dropped
      }
      if (v == TileVisit::full) EXPECT_EQ(visible, pairs);
    }
}

TEST(TileGrid, CausalSquareAndRectangular) {
  AttentionOptions o;
  expect_consistent(256, 256, o);
  expect_consistent(100, 300, o);
  expect_consistent(1, 130, o);
  const TileGrid g = prefill_tile_grid(256, 256, o);
  EXPECT_EQ(g.partial_tiles(), 4);              // the diagonal
  EXPECT_EQ(g.full_tiles(), 6);                 // strictly below it
  EXPECT_EQ(g.at(0, 3), TileVisit::outside_range);  // above the diagonal: never visited
}

TEST(TileGrid, SlidingWindowAndNonCausal) {
  AttentionOptions o;
  o.window = 100;
  expect_consistent(512, 512, o);
  const TileGrid g = prefill_tile_grid(512, 512, o);
  EXPECT_EQ(g.at(7, 0), TileVisit::outside_range);  // far behind the window
  o.causal = false;
  o.window = 0;
  const TileGrid dense = prefill_tile_grid(128, 200, o);
  EXPECT_EQ(dense.full_tiles() + dense.partial_tiles(), dense.num_q_blocks * dense.num_k_tiles);
}

TEST(TileGrid, BlockSparseSkipsHoles) {
  const BlockMask bm({512, 32, 1, 32, 4, 1, 3});
  AttentionOptions o;
  o.block_mask = &bm;
  expect_consistent(512, 512, o);
  const TileGrid g = prefill_tile_grid(512, 512, o);
  EXPECT_EQ(g.block_k, 32);  // key tiles follow the mask's block
  int64_t skipped = 0;
  for (TileVisit v : g.visits) skipped += v == TileVisit::skipped;
  EXPECT_GT(skipped, 0);
}

TEST(TileGrid, RejectsEmptyLengths) {
  AttentionOptions o;
  EXPECT_THROW(prefill_tile_grid(0, 10, o), ArgumentError);
  EXPECT_THROW(prefill_tile_grid(10, 0, o), ArgumentError);
}

}  // namespace
}  // namespace attnzoo::explain
