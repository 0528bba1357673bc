// The CUDA bf16 expansion of GGUF blocks: on a GPU, every output bit against the CPU's definition of each format
// (dequantize_row_reference) rounded to nearest-even bf16, for matrices of a few rows up to more than one grid's
// worth of threads (the grid-stride loop). Its refusals are checked on the host by the emulator's cases
// (testing/cuda_emulation/quant_dequant_cases.cc). Compiled by g++ in every CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/quant.h"
#include "testing/device_test_util.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {

#if ATTNZOO_WITH_CUDA

void check(QuantType t, int64_t rows, int64_t cols, uint64_t seed) {
  SCOPED_TRACE(std::string(quant_type_name(t)) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
  const std::vector<uint8_t> raw = testing::random_quant_rows(t, rows, cols, seed);
  DeviceBuffer w_dev(Device::cuda(), raw.size()), y_dev(Device::cuda(), size_t(rows * cols) * 2);
  w_dev.upload(raw.data(), raw.size());
  std::vector<uint16_t> y(static_cast<size_t>(rows * cols), 0xFFFF);  // NaN: an element the kernel forgets fails
  y_dev.upload(y.data(), y.size() * 2);
  QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, rows, cols, "w");
  const QuantMatrix w_host = w;
  w.data = w_dev.data();
  TensorView yv = TensorView::contiguous(y_dev.data(), DType::bf16, {rows, cols});
  yv.device = Device::cuda();
  quant_dequant_cuda(make_quant_dequant_cuda_problem(w, Device::cuda(), yv), current_stream());
  y_dev.download(y.data(), y.size() * 2);
  synchronize(current_stream());
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_reference(t, w_host.row(r), row.data(), cols);
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(y[size_t(r * cols + c)], f32_to_bf16(row[size_t(c)])) << "row " << r << " column " << c;
  }
}

TEST(CudaQuantDequant, MatchesTheCpuDefinitionRoundedToBf16) {
  REQUIRE_GPU();
  uint64_t seed = 60;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::Q4_K, QuantType::Q5_K,
                      QuantType::Q6_K}) {
    check(t, 37, 2304, seed++);
    // 4096 x 4608 weights: 4.7M groups of 4, past the 2^16 blocks x 256 threads of one grid.
    check(t, 4096, 4608, seed++);
  }
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
