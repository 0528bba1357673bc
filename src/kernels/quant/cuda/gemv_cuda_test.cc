// The CUDA quantized GEMV: what it refuses (checked on the host, no GPU needed), and, on a GPU, its products
// against the CPU's definition of each format (dequantize_row_reference) times x in double precision, within the
// f32 GEMV's bound (1e-5 of sum |w x|), through the public entry quant_gemv_tensors with device tensors (so the
// device branch, the plan and the launch are all exercised). Every format, M = 1, 3 and 8 (x f32, and bf16 at
// M = 3), N = 37 and 4096 x 14336 rows' shapes cut to 64 rows (K past several tiles); the epilogue (bias, accumulation,
// bf16 y) through the kernel's own entry. Compiled by g++ in every
// CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/quant/cuda/gemv_cuda.h"
#include "kernels/quant/gemv_tensors.h"
#include "kernels/quant/quant.h"
#include "testing/device_test_util.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::OnDevice;

const QuantType kFormats[] = {QuantType::BF16, QuantType::F16,  QuantType::Q8_0, QuantType::Q4_0,
                              QuantType::Q4_1, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K};

TEST(CudaQuantGemv, RefusesWhatItDoesNotDo) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_K, 4, 512, 1);
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_K, 4, 512, "w");
  std::vector<float> xs(9 * 512), ys(9 * 4);
  auto view = [](std::vector<float>& v, int64_t r, int64_t c) {
    return testing::on_gpu(TensorView::contiguous(v.data(), DType::f32, {r, c}));
  };
  const Device gpu = Device::cuda();
  EXPECT_NO_THROW(make_quant_gemv_cuda_problem(w, gpu, view(xs, 8, 512), view(ys, 8, 4)));
  testing::expect_error<ArgumentError>([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 9, 512), view(ys, 9, 4)); },
                                       "x: M=9 rows");
  testing::expect_error<ArgumentError>(
      [&] { make_quant_gemv_cuda_problem(w, Device::cpu(), view(xs, 1, 512), view(ys, 1, 4)); }, "w: lives on cpu");
  TensorView y_i32 = view(ys, 1, 4);
  y_i32.dtype = DType::i32;
  testing::expect_error<DTypeError>([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 1, 512), y_i32); },
                                    "y: takes float32, bfloat16 or float16");
  QuantMatrix q3 = w;
  q3.type = QuantType::Q3_K;
  testing::expect_error<ArgumentError>([&] { make_quant_gemv_cuda_problem(q3, gpu, view(xs, 1, 512), view(ys, 1, 4)); },
                                       "w: format Q3_K has no CUDA GEMV");
  QuantMatrix short_rows = w;
  short_rows.row_bytes -= 2;
  testing::expect_error<ArgumentError>(
      [&] { make_quant_gemv_cuda_problem(short_rows, gpu, view(xs, 1, 512), view(ys, 1, 4)); }, "w: row_bytes");
}

#if ATTNZOO_WITH_CUDA

void check(QuantType t, int64_t M, int64_t N, int64_t K, DType x_dtype, uint64_t seed) {
  SCOPED_TRACE(std::string(quant_type_name(t)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
               " K=" + std::to_string(K) + " x " + dtype_name(x_dtype));
  const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, seed);
  const QuantMatrix w_host = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
  DeviceBuffer w_dev(Device::cuda(), raw.size());
  w_dev.upload(raw.data(), raw.size());
  QuantMatrix w = w_host;
  w.data = w_dev.data();

  const HostTensor x(x_dtype, {M, K}, seed + 1);
  HostTensor y(DType::f32, {M, N}, 0, 0.f);
  std::memset(y.bytes.data(), 0xFF, y.bytes.size());  // NaN: an output the kernel forgets fails
  const OnDevice xd(x), yd(y);
  quant_gemv_tensors(w, Device::cuda(), xd.view, yd.view);
  yd.download(y);

  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    dequantize_row_reference(t, w_host.row(n), row.data(), K);
    for (int64_t m = 0; m < M; ++m) {
      double want = 0, abs_sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double prod = double(row[size_t(k)]) * double(load_as_f32(x.view.data, x_dtype, m * K + k));
        want += prod;
        abs_sum += std::fabs(prod);
      }
      const double got = y.at(m * N + n);
      if (!(std::fabs(got - want) <= 1e-5 * abs_sum + 1e-6)) {
        ADD_FAILURE() << "row " << n << " activation row " << m << ": got " << got << ", want " << want;
        return;
      }
    }
  }
}

TEST(CudaQuantGemv, MatchesTheCpuDefinitionOfEveryFormat) {
  REQUIRE_GPU();
  for (QuantType t : kFormats) {
    const bool k_quant = quant_type_info(uint32_t(t))->block_elems == 256;
    uint64_t seed = 40 + uint64_t(t) * 13;
    for (int64_t K : {k_quant ? int64_t(256) : int64_t(96), k_quant ? int64_t(2304) : int64_t(2208), int64_t(14336)})
      for (int64_t M : {1, 3, 8}) check(t, M, K == 14336 ? 64 : 37, K, M == 3 ? DType::bf16 : DType::f32, seed++);
  }
}

// Every output row written, whatever the grid: N from 1 to 4096 + 1 at M = 2.
TEST(CudaQuantGemv, CoversEveryRowCount) {
  REQUIRE_GPU();
  for (int64_t N : {1, 7, 8, 9, 4097}) check(QuantType::Q4_0, 2, N, 512, DType::f32, 7 + uint64_t(N));
}

// The epilogue a model's projections use: + bias and + y into an f32 y (the residual stream), and + bias into a
// bf16 y from f16 x (attention's q / k / v), against the same double product.
TEST(CudaQuantGemv, AddsBiasAndAccumulatesIntoF32Or16BitOutputs) {
  REQUIRE_GPU();
  const int64_t M = 3, N = 37, K = 2304;
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_K, N, K, 91);
  const QuantMatrix w_host = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_K, N, K, "w");
  DeviceBuffer w_dev(Device::cuda(), raw.size());
  w_dev.upload(raw.data(), raw.size());
  QuantMatrix w = w_host;
  w.data = w_dev.data();
  const HostTensor bias(DType::f32, {N}, 92);
  const OnDevice bias_d(bias);
  for (const auto& [x_dtype, y_dtype, accumulate] :
       {std::tuple{DType::f32, DType::f32, true}, std::tuple{DType::f16, DType::bf16, false}}) {
    SCOPED_TRACE(std::string("x ") + dtype_name(x_dtype) + " y " + dtype_name(y_dtype));
    const HostTensor x(x_dtype, {M, K}, 93);
    HostTensor y(y_dtype, {M, N}, 94);
    std::vector<float> y_before(static_cast<size_t>(M * N));
    for (int64_t i = 0; i < M * N; ++i) y_before[size_t(i)] = y.at(i);
    if (!accumulate) testing::fill_nan_bytes(y);
    const OnDevice xd(x), yd(y);
    QuantGemvEpilogue epilogue;
    epilogue.bias = &bias_d.view;
    epilogue.accumulate = accumulate;
    quant_gemv_cuda(make_quant_gemv_cuda_problem(w, Device::cuda(), xd.view, yd.view, epilogue), current_stream());
    yd.download(y);
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = 0; n < N; ++n) {
      dequantize_row_reference(QuantType::Q4_K, w_host.row(n), row.data(), K);
      for (int64_t m = 0; m < M; ++m) {
        double want = bias.at(n) + (accumulate ? y_before[size_t(m * N + n)] : 0.0), abs_sum = std::fabs(want);
        for (int64_t k = 0; k < K; ++k) {
          const double prod = double(row[size_t(k)]) * double(x.at(m * K + k));
          want += prod;
          abs_sum += std::fabs(prod);
        }
        const double rounding = y_dtype == DType::bf16 ? std::fabs(want) / 256 : 0;
        ASSERT_LE(std::fabs(double(y.at(m * N + n)) - want), 1e-5 * abs_sum + 1e-6 + rounding) << "row " << n << ", " << m;
      }
    }
  }
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
