// Weight products for MLA on the tile GEMM. The weight panel (K x 64 columns) is packed to f32 once per task
// and stays in L2 while the task's rows stream through it; K is the latent rank (512 in DeepSeek-V3) or a head
// dim, so a panel is at most a few hundred KiB.
#include <algorithm>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/softmax/mla_matmul.h"

// foreach_target re-includes this file once per target; the shared task geometry is defined once.
#ifndef ATTNZOO_MLA_MATMUL_GRID_
#define ATTNZOO_MLA_MATMUL_GRID_
namespace attnzoo {
namespace {
constexpr int64_t kPanelCols = 64;
constexpr int64_t kBlockRows = 256;

struct TaskGrid {
  int64_t panels, row_blocks;
  int64_t size(const WeightMatmul& mm) const { return mm.batch * panels * row_blocks; }
};

inline TaskGrid task_grid(const WeightMatmul& mm) {
  return {(mm.N + kPanelCols - 1) / kPanelCols, (mm.M + kBlockRows - 1) / kBlockRows};
}
}  // namespace
}  // namespace attnzoo
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/mla_matmul.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/common/tile_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

struct MatmulScratch {
  AlignedBuffer<float> panel, column, c;
};

// Packs columns [n0, n0 + cols) of B_b as a row-major K x padded f32 panel, zero beyond `cols`.
void PackPanel(const WeightMatmul& mm, int64_t b, int64_t n0, int64_t cols, size_t padded, MatmulScratch& sc) {
  const size_t K = size_t(mm.K);
  const size_t elem = dtype_size(mm.w_dtype);
  const char* base = static_cast<const char*>(mm.w) + (b * mm.w_batch + n0 * mm.w_n_stride) * int64_t(elem);
  float* panel = sc.panel.data();
  if (mm.w_n_stride == 1) {  // rows of the panel are contiguous in the weight
    for (size_t k = 0; k < K; ++k) {
      float* dst = panel + k * padded;
      convert_to_f32(base + int64_t(k) * mm.w_k_stride * int64_t(elem), mm.w_dtype, dst, size_t(cols));
      std::fill(dst + cols, dst + padded, 0.f);
    }
    return;
  }
  for (size_t k = 0; k < K; ++k) std::fill(panel + k * padded + size_t(cols), panel + (k + 1) * padded, 0.f);
  for (int64_t n = 0; n < cols; ++n) {
    const char* src = base + n * mm.w_n_stride * int64_t(elem);
    if (mm.w_k_stride == 1) {  // columns are contiguous (B = W^T): convert one, scatter it
      convert_to_f32(src, mm.w_dtype, sc.column.data(), K);
      for (size_t k = 0; k < K; ++k) panel[k * padded + size_t(n)] = sc.column[k];
    } else {
      for (size_t k = 0; k < K; ++k)
        panel[k * padded + size_t(n)] = load_as_f32(src, mm.w_dtype, int64_t(k) * mm.w_k_stride);
    }
  }
}

void RunWeightMatmulTask(const WeightMatmul& mm, int64_t task) {
  static thread_local MatmulScratch sc;
  const TaskGrid grid = task_grid(mm);
  const int64_t b = task / (grid.panels * grid.row_blocks);
  const int64_t panel = (task / grid.row_blocks) % grid.panels;
  const int64_t m0 = (task % grid.row_blocks) * kBlockRows;
  const int64_t n0 = panel * kPanelCols;
  const int64_t cols = std::min(kPanelCols, mm.N - n0);
  const int64_t rows = std::min(kBlockRows, mm.M - m0);
  const size_t padded = size_t((cols + 15) / 16 * 16);
  sc.panel.resize(size_t(mm.K) * padded);
  sc.column.resize(size_t(mm.K));
  PackPanel(mm, b, n0, cols, padded, sc);

  const float* a = mm.a + b * mm.a_batch + m0 * mm.lda;
  float* c = mm.c + b * mm.c_batch + m0 * mm.ldc + n0;
  if (size_t(cols) == padded) {
    TileGemm(size_t(rows), padded, size_t(mm.K), a, size_t(mm.lda), sc.panel.data(), padded, c, size_t(mm.ldc),
             /*accumulate=*/false);
    return;
  }
  // A ragged last panel goes through scratch: the tile GEMM stores whole vectors.
  sc.c.resize(size_t(rows) * padded);
  TileGemm(size_t(rows), padded, size_t(mm.K), a, size_t(mm.lda), sc.panel.data(), padded, sc.c.data(), padded,
           /*accumulate=*/false);
  for (int64_t m = 0; m < rows; ++m)
    std::copy(sc.c.data() + size_t(m) * padded, sc.c.data() + size_t(m) * padded + size_t(cols), c + m * mm.ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunWeightMatmulTask);

void weight_matmul(const WeightMatmul& mm) {
  if (mm.batch <= 0 || mm.M <= 0 || mm.N <= 0) return;
  if (mm.K == 0) {
    for (int64_t b = 0; b < mm.batch; ++b)
      for (int64_t m = 0; m < mm.M; ++m) std::fill_n(mm.c + b * mm.c_batch + m * mm.ldc, mm.N, 0.f);
    return;
  }
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  const TaskGrid grid = task_grid(mm);
  ThreadPool::global().parallel_for(grid.size(mm), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunWeightMatmulTask)(mm, task);
  });
}

void weight_matmul_reference(const WeightMatmul& mm) {
  for (int64_t b = 0; b < mm.batch; ++b)
    for (int64_t m = 0; m < mm.M; ++m)
      for (int64_t n = 0; n < mm.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < mm.K; ++k)
          acc += double(mm.a[b * mm.a_batch + m * mm.lda + k]) *
                 double(load_as_f32(mm.w, mm.w_dtype, b * mm.w_batch + k * mm.w_k_stride + n * mm.w_n_stride));
        mm.c[b * mm.c_batch + m * mm.ldc + n] = float(acc);
      }
}

}  // namespace attnzoo
#endif
