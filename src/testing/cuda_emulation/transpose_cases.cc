// transpose_cuda's kernel (layers/cuda/transpose_kernel.cuh) under the CTA emulator: token-major blocks (column
// slices of wider rows among them, as the Mamba-1 mixer reads its fused projections) into channel-major ones and
// back, grids capped so both grid-stride loops take more than one round. Every value must land at its transposed
// place, and the destination's padding columns and tail stay untouched.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/cuda/transpose_kernel.cuh"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::StridedOperand;

unsigned capped(unsigned blocks, unsigned cap) { return blocks < cap ? blocks : cap; }

struct TransposeCase {
  int64_t rows, cols;
  int64_t src_stride, src_col;  // src: [rows, src_stride] storage, the transposed columns from src_col
  int64_t dst_stride;           // dst: [cols, dst_stride] storage, rows columns written in each
};

void check_transpose(const TransposeCase& c, uint64_t seed) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " cols " + std::to_string(c.cols) + " src col " +
               std::to_string(c.src_col) + " dst stride " + std::to_string(c.dst_stride));
  StridedOperand src(DType::f32, {c.rows, c.src_stride}, seed);
  StridedOperand dst(DType::f32, {c.cols, c.dst_stride}, seed + 100);
  const std::vector<uint8_t> dst_before = dst.host;
  const TransposeParams p{src.device_ptr<const float>() + c.src_col, dst.device_ptr<float>(), c.rows, c.cols,
                          c.src_stride, c.dst_stride};
  const dim3 full = transpose_grid(c.rows, c.cols);
  const dim3 grid(capped(full.x, 2), capped(full.y, 3));
  cuda_emulation::launch(grid, kTransposeThreads, 0, [&](unsigned char*) { transpose_rows(p); });
  dst.download();

  const float* before = reinterpret_cast<const float*>(dst_before.data());
  for (int64_t d = 0; d < c.cols; ++d)
    for (int64_t j = 0; j < c.dst_stride; ++j) {
      const bool written = j < c.rows;
      const float want = written ? src.at(j * c.src_stride + c.src_col + d) : before[d * c.dst_stride + j];
      ASSERT_EQ(dst.at(d * c.dst_stride + j), want) << "dst row " << d << " col " << j;
    }
  EXPECT_TRUE(dst.outside_untouched());
}

TEST(EmulatedTranspose, TokenRowsToChannelsAndBack) {
  // Contiguous [7, 600] into [600, 7]: 19 column tiles over two x-blocks, one partial row tile.
  check_transpose({7, 600, 600, 0, 7}, 1);
  // A prompt-sized block: 7 row tiles over three y-blocks and 3 column tiles over two x-blocks, the last of each
  // partial, from a column slice into padded destination rows.
  check_transpose({200, 70, 75, 3, 203}, 6);
  // Whole tiles only: [64, 96], two rounds in x.
  check_transpose({64, 96, 96, 0, 64}, 7);
  // The z half of fused [x | z] rows: a column slice at an offset.
  check_transpose({5, 40, 80, 40, 5}, 2);
  // B out of [dt | B | C] rows, odd widths, into padded destination rows.
  check_transpose({9, 3, 11, 5, 12}, 3);
  // A single token (a decode-sized block) and a single channel.
  check_transpose({1, 33, 33, 0, 1}, 4);
  check_transpose({13, 1, 4, 2, 13}, 5);
}

}  // namespace
}  // namespace attnzoo
