// The CUDA bf16 expansion of GGUF blocks (kernels/quant/cuda: dequant_kernel.cuh, launched as dequant_launch.h
// plans it) under the CTA emulator against the CPU's definition: every output bit equal to
// dequantize_row_reference's value rounded to nearest-even bf16. Every format the kernel takes, random blocks
// (random f16 scales, the K-quants' packed 6-bit scales / mins), a few rows and a whole number of blocks per row
// (one block; several); the grid capped at two blocks, so the grid-stride loop takes many rounds and crosses
// rows within a thread. w sits in an allocation of exactly its bytes and y in one of exactly its own, so an
// over-read or over-write fails the case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/cuda/dequant_kernel.cuh"
#include "kernels/quant/cuda/dequant_launch.h"
#include "kernels/quant/quant.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceMemory;
using testing::expect_refusal;
using namespace cuda_quant;

// dequant.cu's dispatch, the grid capped at `max_grid`.
void launch(DequantLaunch l, unsigned max_grid) {
  l.grid = std::min(l.grid, max_grid);
  cuda_emulation::launch(dim3(l.grid), kDequantThreads, 0, [&](unsigned char*) {
    switch (l.type) {
      case QuantType::Q8_0: return quant_dequant_thread<QuantType::Q8_0>(l.params);
      case QuantType::Q4_0: return quant_dequant_thread<QuantType::Q4_0>(l.params);
      case QuantType::Q4_1: return quant_dequant_thread<QuantType::Q4_1>(l.params);
      case QuantType::Q4_K: return quant_dequant_thread<QuantType::Q4_K>(l.params);
      case QuantType::Q5_K: return quant_dequant_thread<QuantType::Q5_K>(l.params);
      case QuantType::Q6_K: return quant_dequant_thread<QuantType::Q6_K>(l.params);
      default: ADD_FAILURE() << "no kernel for " << quant_type_name(l.type);
    }
  });
}

TensorView on_gpu(void* data, DType dtype, int64_t rows, int64_t cols) {
  TensorView t = TensorView::contiguous(data, dtype, {rows, cols});
  t.device = Device::cuda();
  return t;
}

void check(QuantType t, int64_t rows, int64_t cols, uint64_t seed, unsigned max_grid) {
  SCOPED_TRACE(std::string(quant_type_name(t)) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               " grid<=" + std::to_string(max_grid));
  const std::vector<uint8_t> raw = testing::random_quant_rows(t, rows, cols, seed);
  DeviceMemory w_mem(raw.size()), y_mem(size_t(rows * cols) * 2);
  std::memcpy(w_mem.data(), raw.data(), raw.size());
  std::memset(y_mem.data(), 0xFF, y_mem.size());
  const QuantMatrix w_host = make_quant_matrix(raw.data(), raw.size(), t, rows, cols, "w");
  QuantMatrix w = w_host;
  w.data = w_mem.data();
  const DequantLaunch l =
      plan_quant_dequant(make_quant_dequant_cuda_problem(w, Device::cuda(), on_gpu(y_mem.data(), DType::bf16, rows, cols)));
  ASSERT_FALSE(l.empty);
  cuda_emulation::seed_schedule(seed);
  launch(l, max_grid);

  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_reference(t, w_host.row(r), row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      uint16_t got;
      std::memcpy(&got, y_mem.data() + (r * cols + c) * 2, 2);
      const uint16_t want = f32_to_bf16(row[size_t(c)]);
      if (got != want) {
        ADD_FAILURE() << "row " << r << " column " << c << ": bits " << got << ", want " << want << " ("
                      << row[size_t(c)] << ")";
        return;  // one element says it; the rest would repeat it
      }
    }
  }
}

void check_format(QuantType t) {
  const int64_t block = quant_type_info(uint32_t(t))->block_elems;
  uint64_t seed = 300 + uint64_t(t) * 13;
  check(t, 5, block, seed++, 2);         // one block per row: a thread's rounds cross rows
  check(t, 7, 9 * block, seed++, 2);     // several blocks, 7 x 9 not a whole number of a block's threads
  check(t, 3, 4 * block, seed++, 1u << 16);  // the planned grid
}

TEST(CudaQuantDequantEmulated, Q8_0) { check_format(QuantType::Q8_0); }
TEST(CudaQuantDequantEmulated, Q4_0) { check_format(QuantType::Q4_0); }
TEST(CudaQuantDequantEmulated, Q4_1) { check_format(QuantType::Q4_1); }
TEST(CudaQuantDequantEmulated, Q4_K) { check_format(QuantType::Q4_K); }
TEST(CudaQuantDequantEmulated, Q5_K) { check_format(QuantType::Q5_K); }
TEST(CudaQuantDequantEmulated, Q6_K) { check_format(QuantType::Q6_K); }

// An empty matrix launches nothing; the refusals name the argument.
TEST(CudaQuantDequantEmulated, RefusesByName) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_0, 4, 64, 1);
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, 4, 64, "w");
  std::vector<uint16_t> ys(4 * 64 + 2);
  const Device gpu = Device::cuda();
  QuantMatrix none = w;
  none.rows = 0;
  EXPECT_TRUE(plan_quant_dequant(make_quant_dequant_cuda_problem(none, gpu, on_gpu(ys.data(), DType::bf16, 0, 64))).empty);
  const TensorView y = on_gpu(ys.data(), DType::bf16, 4, 64);
  expect_refusal([&] { make_quant_dequant_cuda_problem(w, Device::cpu(), y); }, "w: lives on cpu");
  QuantMatrix q5 = w;
  q5.type = QuantType::Q5_0;
  expect_refusal([&] { make_quant_dequant_cuda_problem(q5, gpu, y); }, "w: format Q5_0 has no CUDA dequantization");
  QuantMatrix grouped = w;
  grouped.row_group = 16;
  expect_refusal([&] { make_quant_dequant_cuda_problem(grouped, gpu, y); }, "w: rows regrouped");
  QuantMatrix odd = w;
  odd.data = raw.data() + 1;
  expect_refusal([&] { make_quant_dequant_cuda_problem(odd, gpu, y); }, "w: data must be 2-byte aligned");
  expect_refusal([&] { make_quant_dequant_cuda_problem(w, gpu, on_gpu(ys.data(), DType::f16, 4, 64)); }, "y: takes bfloat16");
  expect_refusal([&] { make_quant_dequant_cuda_problem(w, gpu, on_gpu(ys.data(), DType::bf16, 4, 32)); }, "y: must be [4, 64]");
  TensorView host_y = y;
  host_y.device = Device::cpu();
  expect_refusal([&] { make_quant_dequant_cuda_problem(w, gpu, host_y); }, "y: lives on cpu");
  QuantMatrix w_in_y = w;
  w_in_y.data = ys.data();
  expect_refusal([&] { make_quant_dequant_cuda_problem(w_in_y, gpu, y); }, "y: overlaps w");
}

}  // namespace
}  // namespace attnzoo
