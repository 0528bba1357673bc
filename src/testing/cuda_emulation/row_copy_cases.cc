// copy_rows_cuda's kernel (layers/cuda/row_copy_kernel.cuh) under the CTA emulator: a gather through an index
// (pool slots into a dense state block), a scatter back, and a plain copy of a column slice out of wider rows;
// 16-byte and scalar accesses, grids capped so every grid-stride loop takes more than one round. Every value must
// land exactly where the index says, and the bytes around the written rows stay untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "layers/cuda/row_copy_kernel.cuh"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/row_index.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::RowIndex;
using cuda_emulation::StridedOperand;

unsigned capped(unsigned blocks, unsigned cap) { return blocks < cap ? blocks : cap; }

struct CopyCase {
  int64_t rows, cols;
  int64_t src_rows, src_stride, src_col;  // src: [src_rows, src_stride] storage, the copied columns from src_col
  int64_t dst_rows, dst_stride, dst_col;
  bool gather, scatter;
  bool vector;  // whether row_copy.cu takes 16-byte accesses for it
};

void check_copy(const CopyCase& c, uint64_t seed) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " cols " + std::to_string(c.cols) + (c.gather ? " gather" : "") +
               (c.scatter ? " scatter" : "") + " src col " + std::to_string(c.src_col) + " dst col " +
               std::to_string(c.dst_col));
  // Whole storage rows of random values on both sides; the copy reads and writes columns [col, col + cols).
  StridedOperand src(DType::f32, {c.src_rows, c.src_stride}, seed);
  StridedOperand dst(DType::f32, {c.dst_rows, c.dst_stride}, seed + 100);
  const std::vector<uint8_t> dst_before = dst.host;
  // Distinct rows on the indexed sides, in a shuffled order (the pool's slots of a batch).
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const RowIndex from(c.gather, c.rows, c.src_rows, rng), to(c.scatter, c.rows, c.dst_rows, rng);

  const RowCopyParams p{src.device_ptr<const float>() + c.src_col,
                        dst.device_ptr<float>() + c.dst_col,
                        from.device_ptr(),
                        to.device_ptr(),
                        c.rows,
                        c.cols,
                        c.src_stride,
                        c.dst_stride};
  // row_copy.cu's choice of access width.
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const bool vec =
      c.cols % 4 == 0 && c.src_stride % 4 == 0 && c.dst_stride % 4 == 0 && aligned(p.src) && aligned(p.dst);
  EXPECT_EQ(vec, c.vector);
  const int n = vec ? 4 : 1;
  const dim3 grid(capped(grid_for(c.cols / n, kCopyThreads), 2), capped(unsigned(c.rows), 3));
  cuda_emulation::launch(grid, kCopyThreads, 0, [&](unsigned char*) { vec ? copy_rows<4>(p) : copy_rows<1>(p); });
  dst.download();

  // Each destination element: the source's where the copy wrote, else its old value; the bytes past the rows
  // (the operand's 16-byte tail) untouched.
  std::vector<int64_t> source_row(size_t(c.dst_rows), -1);
  for (int64_t r = 0; r < c.rows; ++r)
    source_row[size_t(c.scatter ? to[r] : r)] = c.gather ? from[r] : r;
  const float* before = reinterpret_cast<const float*>(dst_before.data());
  for (int64_t d = 0; d < c.dst_rows; ++d)
    for (int64_t j = 0; j < c.dst_stride; ++j) {
      const int64_t s = source_row[size_t(d)];
      const bool copied = s >= 0 && j >= c.dst_col && j < c.dst_col + c.cols;
      const float want = copied ? src.at(s * c.src_stride + c.src_col + (j - c.dst_col)) : before[d * c.dst_stride + j];
      ASSERT_EQ(dst.at(d * c.dst_stride + j), want) << "dst row " << d << " col " << j << (copied ? " (copied)" : "");
    }
  EXPECT_TRUE(dst.outside_untouched());
}

TEST(EmulatedRowCopy, GathersScattersAndSlicesRows) {
  // A gather of 5 of 9 slots into a dense block, 16-byte accesses over two x-blocks and two row rounds.
  check_copy({5, 2312, 9, 2320, 0, 5, 2312, 0, true, false, true}, 1);
  // The scatter back into 7 of 11 slots, at column 4 of each.
  check_copy({7, 96, 7, 96, 0, 11, 104, 4, false, true, true}, 2);
  // Both sides indexed; 4 of 6 rows into 4 of 5.
  check_copy({4, 40, 6, 48, 8, 5, 44, 0, true, true, true}, 3);
  // A column slice of odd width out of wider rows, no index: scalar accesses.
  check_copy({6, 37, 6, 101, 13, 6, 37, 0, false, false, false}, 4);
  // An unaligned start (column 1) on a row of whole vectors: scalar accesses too.
  check_copy({3, 64, 3, 80, 1, 3, 64, 0, false, false, false}, 5);
}

}  // namespace
}  // namespace attnzoo
