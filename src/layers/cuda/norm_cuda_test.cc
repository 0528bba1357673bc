// The CUDA RMSNorm against the double-accumulating reference (norm.h): dtypes, row lengths on both sides of the
// warp / block switch and of the 16-byte vectors, strided head rows, the fused residual add, the mean-centred
// form. Refusals and the row addressing are host-only and run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rows.h"
#include "layers/cuda/step_test_util.h"
#include "layers/norm.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(StepRows, AddressesSlicesAndHeads) {
  // q as the first 4 heads of a fused [T, (4 + 2 + 2) * 64] qkv row.
  TensorView q = fake_cuda_view(DType::bf16, {5, 4, 64});
  q.strides = {8 * 64, 64, 1};
  const Rows r = rows_of(q, "q");
  EXPECT_EQ(r.count, 20);
  EXPECT_EQ(r.cols, 64);
  EXPECT_EQ(r.inner, 4);
  EXPECT_EQ(r.outer_stride, 8 * 64);
  EXPECT_EQ(r.inner_stride, 64);
  EXPECT_TRUE(rows_vectorizable(r, q.data, 2));
  TensorView odd = q;
  odd.strides = {8 * 64 + 4, 64, 1};  // a token stride of 4 bf16 is half a vector
  EXPECT_FALSE(rows_vectorizable(rows_of(odd, "q"), q.data, 2));
  EXPECT_FALSE(rows_vectorizable(r, static_cast<char*>(q.data) + 2, 2));

  const Rows flat = rows_of(fake_cuda_view(DType::f32, {2, 3, 4, 5}), "x");  // contiguous 4-D: rows of 5
  EXPECT_EQ(flat.count, 24);
  EXPECT_EQ(flat.outer_stride, 5);
  TensorView gapped = fake_cuda_view(DType::f32, {2, 3, 4, 5});
  gapped.strides[0] = 100;
  expect_error<ArgumentError>([&] { rows_of(gapped, "x"); }, "x: a tensor of more than 3 dimensions");
  TensorView column = fake_cuda_view(DType::f32, {4, 6});
  column.strides = {1, 4};
  expect_error<ArgumentError>([&] { rows_of(column, "x"); }, "x: last dimension must be contiguous");
}

TEST(RmsNormCuda, RefusesNamingTheArgument) {
  const TensorView x = fake_cuda_view(DType::bf16, {3, 64}), y = x, w = fake_cuda_view(DType::f32, {64});
  const RmsNormCudaOptions opts;
  EXPECT_NO_THROW(check_rms_norm_cuda(x, &y, w, y, opts));

  TensorView host_x = x;
  host_x.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_rms_norm_cuda(host_x, nullptr, w, y, opts); }, "x: lives on cpu");
  // The launcher refuses before touching CUDA: no GPU needed to see it.
  expect_error<ArgumentError>([&] { rms_norm_cuda(host_x, w, y, opts); }, "x: lives on cpu");
  TensorView other_gpu = y;
  other_gpu.device = Device::cuda(1);
  expect_error<ArgumentError>([&] { check_rms_norm_cuda(x, nullptr, w, other_gpu, opts); },
                              "y: lives on cuda:1, the other operands on cuda:0");
  expect_error<DTypeError>([&] { check_rms_norm_cuda(fake_cuda_view(DType::i32, {3, 64}), nullptr, w, y, opts); },
                           "x: expected float32, bfloat16 or float16");
  expect_error<DTypeError>(
      [&] { check_rms_norm_cuda(x, nullptr, w, fake_cuda_view(DType::f16, {3, 64}), opts); }, "y: dtype float16");
  // A 16-bit y under an f32 x (the residual stream's norm as bf16 projection input), with or without the add.
  const TensorView x32 = fake_cuda_view(DType::f32, {3, 64});
  EXPECT_NO_THROW(check_rms_norm_cuda(x32, nullptr, w, y, opts));
  EXPECT_NO_THROW(check_rms_norm_cuda(x32, &x32, w, fake_cuda_view(DType::f16, {3, 64}), opts));
  expect_error<DTypeError>([&] { check_rms_norm_cuda(x32, &x, w, y, opts); }, "residual: dtype bfloat16");
  expect_error<ArgumentError>(
      [&] { check_rms_norm_cuda(x, nullptr, w, fake_cuda_view(DType::bf16, {3, 32}), opts); }, "y: shape");
  const TensorView short_residual = fake_cuda_view(DType::bf16, {2, 64});
  expect_error<ArgumentError>([&] { check_rms_norm_cuda(x, &short_residual, w, y, opts); }, "residual: shape");
  expect_error<DTypeError>(
      [&] { check_rms_norm_cuda(x, nullptr, fake_cuda_view(DType::bf16, {64}), y, opts); }, "weight: must be float32");
  expect_error<ArgumentError>(
      [&] { check_rms_norm_cuda(x, nullptr, fake_cuda_view(DType::f32, {63}), y, opts); }, "weight: expected");
  RmsNormCudaOptions nan_eps;
  nan_eps.eps = NAN;
  expect_error<ArgumentError>([&] { check_rms_norm_cuda(x, nullptr, w, y, nan_eps); }, "eps: ");
  TensorView null_x = x;
  null_x.data = nullptr;
  expect_error<ArgumentError>([&] { check_rms_norm_cuda(null_x, nullptr, w, y, opts); }, "x: data is null");
}

#if ATTNZOO_WITH_CUDA

struct NormCase {
  DType dtype;
  int64_t rows, dim;
  bool residual = false, centered = false;
  int64_t row_pad = 0;  // elements between rows (x, residual and y alike)
  bool heads = false;   // x as [rows / 4, 4, dim] heads inside a wider token row
};

std::string name(const NormCase& c) {
  return std::string(dtype_name(c.dtype)) + " rows " + std::to_string(c.rows) + " dim " + std::to_string(c.dim) +
         (c.residual ? " +residual" : "") + (c.centered ? " centered" : "") + " pad " + std::to_string(c.row_pad) +
         (c.heads ? " heads" : "");
}

DeviceOperand operand(const NormCase& c, uint64_t seed) {
  if (c.heads) {
    const int64_t tokens = c.rows / 4, token_stride = 6 * c.dim + c.row_pad;  // 4 heads of 6 in the row
    return DeviceOperand(c.dtype, {tokens, 4, c.dim}, seed, {token_stride, c.dim, 1});
  }
  return DeviceOperand(c.dtype, {c.rows, c.dim}, seed, {c.dim + c.row_pad, 1});
}

void check_case(const NormCase& c) {
  SCOPED_TRACE(name(c));
  DeviceOperand x = operand(c, 1), y = operand(c, 0), residual = operand(c, 3);
  std::vector<float> w(size_t(c.dim));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(1.f, 0.3f);
  for (float& v : w) v = dist(rng);
  DeviceBuffer w_dev(Device::cuda(), w.size() * sizeof(float));
  w_dev.upload(w.data(), w.size() * sizeof(float));
  TensorView w_view = TensorView::contiguous(w_dev.data(), DType::f32, {c.dim});
  w_view.device = Device::cuda();

  // The reference's input rows: x, or the residual stream after the add, rounded to the dtype as it is stored.
  std::vector<int64_t> x_offs, r_offs, y_offs;
  x.for_each([&](int64_t o) { x_offs.push_back(o); });
  residual.for_each([&](int64_t o) { r_offs.push_back(o); });
  y.for_each([&](int64_t o) { y_offs.push_back(o); });
  std::vector<float> src(x_offs.size()), want(x_offs.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (!c.residual) {
      src[i] = x.at(x_offs[i]);
    } else {
      uint8_t rounded[4];
      store_from_f32(rounded, c.dtype, 0, x.at(x_offs[i]) + residual.at(r_offs[i]));
      src[i] = load_as_f32(rounded, c.dtype, 0);
    }
  }
  testing::norm_rows_reference(src.data(), w.data(), c.rows, c.dim, c.centered, want.data());

  RmsNormCudaOptions opts;
  opts.eps = 1e-5f;
  opts.mean_centered = c.centered;
  if (c.residual) {
    fused_add_rms_norm_cuda(x.device_view(), residual.device_view(), w_view, y.device_view(), opts);
  } else {
    rms_norm_cuda(x.device_view(), w_view, y.device_view(), opts);
  }
  y.download();
  residual.download();
  synchronize(current_stream());

  // f32 sums of squares over <= 4096 terms (a per-lane run, then a tree): ~1e-6 relative against the double
  // reference; the output dtype's rounding then adds up to one of its ulps (output_tolerance).
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(y.at(y_offs[i])) - want[i]);
    worst = std::max(worst, err / testing::output_tolerance(c.dtype, want[i], 4e-6, 1e-6));
    if (c.residual) ASSERT_EQ(residual.at(r_offs[i]), src[i]) << "residual element " << i;  // same f32 add, same rounding
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_TRUE(y.outside_untouched());
  EXPECT_TRUE(residual.outside_untouched());
}

class RmsNormCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

TEST_F(RmsNormCudaGpu, MatchesReference) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    check_case({dt, 37, 128});                         // warp per row, 16-byte vectors
    check_case({dt, 3, 4096});                         // block per row
    check_case({dt, 5, 100});                          // 100 is no whole number of vectors: the scalar path
    check_case({dt, 2, 3001, false, false, 0});        // long and odd: a block per row, scalar accesses
    check_case({dt, 300, 64, true});                   // fused residual, many rows
    check_case({dt, 4, 5120, true, false, 8});         // fused residual, padded rows, vectors still aligned
    check_case({dt, 6, 96, false, true});              // mean-centred
    check_case({dt, 3, 2048, true, true, 3});          // mean-centred after the add, unaligned rows
    check_case({dt, 12, 128, false, false, 0, true});  // q heads inside a fused qkv row
    check_case({dt, 8, 64, false, false, 1, true});    // ... with a token stride that breaks the vectors
  }
}

TEST_F(RmsNormCudaGpu, ObjectFoldsGemmaWeightAndWorksInPlace) {
  std::vector<float> w(256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * float(i % 17) - 0.05f;
  const RmsNorm norm(TensorView::contiguous(w.data(), DType::f32, {256}), 1e-6f, /*add_one=*/true, "norm");
  const RmsNormCuda gpu(norm, Device::cuda());
  DeviceOperand x(DType::f32, {9, 256}, 11);
  std::vector<float> want(9 * 256);
  norm.forward(x.view.ptr<float>(), 9, 256, want.data(), 256);
  gpu.forward(x.device_view(), x.device_view());  // in place
  x.download();
  synchronize(current_stream());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(x.at(int64_t(i)), want[i], 1e-5 * (1 + std::fabs(want[i])));
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
