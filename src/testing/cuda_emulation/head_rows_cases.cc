// copy_head_rows_cuda's kernel (layers/cuda/head_rows_kernel.cuh) under the CTA emulator against its twin on the
// host (layers/head_rows.h), on the copies MLA's expanded prefill makes (models/cuda/device_mla.cc): a gather of
// pool slots, a column slice of wider heads, one head broadcast to all and zero-padded, a padding gather of
// query rows and the scatter of a sliced output back. Grids are capped so every grid-stride loop takes more than
// one round; the bytes the copy must not write keep their values, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "layers/cuda/head_rows_kernel.cuh"
#include "layers/head_rows.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/row_index.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::RowIndex;
using cuda_emulation::StridedOperand;

unsigned capped(unsigned blocks, unsigned cap) { return blocks < cap ? blocks : cap; }

// src: storage [src_rows, src_heads, src_stride], the copied columns [src_col, src_col + cols); dst: storage
// [dst_rows, heads, dst_stride], the written columns [dst_col, dst_col + width).
struct HeadCase {
  int64_t rows, heads, cols, width;
  int64_t src_rows, src_heads, src_stride, src_col;
  int64_t dst_rows, dst_stride, dst_col;
  bool gather, scatter;
};

TensorView slice(const TensorView& storage, int64_t col, int64_t cols) {
  TensorView t = storage;
  t.data = static_cast<uint8_t*>(t.data) + size_t(col) * dtype_size(t.dtype);
  t.shape[2] = cols;
  return t;
}

void check_copy(const HeadCase& c, DType dtype, uint64_t seed) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " heads " + std::to_string(c.heads) + " cols " +
               std::to_string(c.cols) + " width " + std::to_string(c.width) + (c.gather ? " gather" : "") +
               (c.scatter ? " scatter" : "") + " " + dtype_name(dtype));
  StridedOperand src(dtype, {c.src_rows, c.src_heads, c.src_stride}, seed);
  StridedOperand dst(dtype, {c.dst_rows, c.heads, c.dst_stride}, seed + 100);
  std::vector<uint8_t> twin = dst.host;  // the host copy's destination, from the same bytes
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const RowIndex from(c.gather, c.rows, c.src_rows, rng), to(c.scatter, c.rows, c.dst_rows, rng);

  HeadRowCopy on_device{slice(src.device_view(), c.src_col, c.cols), slice(dst.device_view(), c.dst_col, c.width),
                        from.device_ptr(), to.device_ptr(), c.rows};
  check_head_row_copy(on_device, nullptr);
  const HeadRowParams p = head_row_params(on_device);
  const dim3 grid(capped(grid_for(p.heads * p.width, kHeadRowThreads), 2), capped(unsigned(c.rows), 3));
  cuda_emulation::launch(grid, kHeadRowThreads, 0, [&](unsigned char*) { copy_head_rows(p); });
  dst.download();

  TensorView twin_dst = dst.view;
  twin_dst.data = twin.data();
  copy_head_rows({slice(src.view, c.src_col, c.cols), slice(twin_dst, c.dst_col, c.width),
                  from.host_ptr(), to.host_ptr(), c.rows});
  ASSERT_EQ(0, std::memcmp(dst.host.data(), twin.data(), twin.size())) << "the kernel and its twin disagree";

  // The twin itself, element by element: the source's bits, zeros past them, the rest untouched.
  std::vector<int64_t> source_row(size_t(c.dst_rows), -1);
  for (int64_t r = 0; r < c.rows; ++r)
    source_row[size_t(c.scatter ? to[r] : r)] = c.gather ? from[r] : r;
  StridedOperand before(dtype, {c.dst_rows, c.heads, c.dst_stride}, seed + 100);
  for (int64_t d = 0; d < c.dst_rows; ++d)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t j = 0; j < c.dst_stride; ++j) {
        const int64_t s = source_row[size_t(d)], k = j - c.dst_col, at = (d * c.heads + h) * c.dst_stride + j;
        const bool written = s >= 0 && k >= 0 && k < c.width;
        const int64_t sh = c.src_heads == 1 ? 0 : h;
        const float want = !written      ? before.at(at)
                           : k < c.cols ? src.at((s * c.src_heads + sh) * c.src_stride + c.src_col + k)
                                        : 0.f;
        ASSERT_EQ(dst.at(at), want) << "dst row " << d << " head " << h << " col " << j;
      }
  EXPECT_TRUE(dst.outside_untouched());
}

TEST(EmulatedHeadRows, CopiesMlaPrefillMakes) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    // The latent rows of a context gathered from 11 of 23 pool slots: [slots, 1, r + dr] -> [keys, 1, r + dr].
    check_copy({11, 1, 96, 96, 23, 1, 96, 0, 11, 96, 0, true, false}, dtype, 1);
    // k_nope out of the expansion's [keys, H, dn + dv] heads into K's first dn columns (no padding).
    check_copy({7, 4, 32, 32, 7, 4, 72, 0, 7, 64, 0, false, false}, dtype, 2);
    // V: the last dv of each head, zero-padded to 64.
    check_copy({7, 4, 40, 64, 7, 4, 72, 32, 7, 64, 0, false, false}, dtype, 3);
    // k_pe, one head of the latent rows (after c_kv) broadcast to every head at column dn, zeros to the end.
    check_copy({9, 5, 16, 48, 9, 1, 80, 64, 9, 128, 80, false, false}, dtype, 4);
    // The queries of prefill rows gathered out of the step's rows and padded: 192 -> 256 (DeepSeek-V3's width).
    check_copy({6, 2, 192, 256, 13, 2, 192, 0, 6, 256, 0, true, false}, dtype, 5);
    // The padded output's first dv columns scattered back into the step's rows.
    check_copy({6, 3, 40, 40, 6, 3, 64, 0, 13, 40, 0, false, true}, dtype, 6);
  }
}

}  // namespace
}  // namespace attnzoo
