// The projections' GEMM (gemm_cuda.h) on a GPU against the double reference (testing/gemm_reference.h): ours on
// both tiles and cuBLASLt where the build has it, on shapes off the tile edges, padded rows, f32 activations,
// bias and accumulation, and one prefill-sized K. Refusals and the backend choice are host-only and run without
// a GPU; so do the emulated cases of the kernel itself (testing/cuda_emulation/gemm_cases.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "testing/gemm_reference.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(GemmCuda, RefusesNamingTheArgument) {
  const TensorView x = fake_cuda_view(DType::bf16, {5, 64}), w = fake_cuda_view(DType::bf16, {32, 64}),
                   y = fake_cuda_view(DType::f32, {5, 32}), bias = fake_cuda_view(DType::f32, {32});
  EXPECT_NO_THROW(make_gemm_problem(x, w, &bias, y, {}));

  TensorView host_x = x;
  host_x.device = Device::cpu();
  expect_error<ArgumentError>([&] { make_gemm_problem(host_x, w, nullptr, y, {}); }, "x: lives on cpu");
  expect_error<ArgumentError>([&] { gemm_cuda(host_x, w, nullptr, y); }, "x: lives on cpu");  // before any CUDA call
  TensorView other = y;
  other.device = Device::cuda(1);
  expect_error<ArgumentError>([&] { make_gemm_problem(x, w, nullptr, other, {}); }, "y: lives on cuda:1");
  expect_error<DTypeError>([&] { make_gemm_problem(x, fake_cuda_view(DType::f32, {32, 64}), nullptr, y, {}); },
                           "w: dtype float32 is not supported");
  expect_error<DTypeError>([&] { make_gemm_problem(fake_cuda_view(DType::i32, {5, 64}), w, nullptr, y, {}); }, "x:");
  expect_error<ArgumentError>([&] { make_gemm_problem(x, fake_cuda_view(DType::bf16, {32, 48}), nullptr, y, {}); },
                              "w: shape [32, 48]: dimension 1 must be x's K = 64");
  expect_error<ArgumentError>([&] { make_gemm_problem(x, w, nullptr, fake_cuda_view(DType::f32, {5, 31}), {}); },
                              "y: shape [5, 31]: dimension 1 must be w's N = 32");
  expect_error<ArgumentError>([&] { make_gemm_problem(fake_cuda_view(DType::bf16, {1, 5, 64}), w, nullptr, y, {}); },
                              "x: must be 2-D [M, K]");
  TensorView columns = x;
  columns.strides = {1, 5};
  expect_error<ArgumentError>([&] { make_gemm_problem(columns, w, nullptr, y, {}); }, "x: last dimension must be contiguous");
  TensorView overlapping = y;
  overlapping.strides[0] = 16;
  expect_error<ArgumentError>([&] { make_gemm_problem(x, w, nullptr, overlapping, {}); }, "y: rows overlap");
  const TensorView short_bias = fake_cuda_view(DType::f32, {31});
  expect_error<ArgumentError>([&] { make_gemm_problem(x, w, &short_bias, y, {}); }, "bias: must be 1-D [N]");
}

TEST(GemmCuda, ResolvesTheBackend) {
  const TensorView x = fake_cuda_view(DType::bf16, {5, 64}), w = fake_cuda_view(DType::bf16, {32, 64}),
                   y = fake_cuda_view(DType::bf16, {5, 32});
  const GemmProblem p = make_gemm_problem(x, w, nullptr, y, {});
  EXPECT_EQ(resolve_gemm_backend(p, GemmBackend::ours), GemmBackend::ours);
  EXPECT_EQ(resolve_gemm_backend(p, GemmBackend::automatic),
            cublaslt_built() ? GemmBackend::cublaslt : GemmBackend::ours);
  // f32 activations: cuBLASLt multiplies one dtype, so ours runs them even where cuBLASLt is built.
  const GemmProblem f32_x = make_gemm_problem(fake_cuda_view(DType::f32, {5, 64}), w, nullptr, y, {});
  EXPECT_EQ(resolve_gemm_backend(f32_x, GemmBackend::automatic), GemmBackend::ours);
  expect_error<ArgumentError>([&] { resolve_gemm_backend(f32_x, GemmBackend::cublaslt); },
                              cublaslt_built() ? "backend: cublaslt cannot run this problem: x and w differ"
                                               : "backend: cublaslt cannot run this problem: this build has no cuBLASLt");
}

struct GpuCase {
  int64_t M, N, K;
  DType x = DType::bf16, w = DType::bf16, y = DType::f32;
  int64_t pad = 0;
  bool bias = false, accumulate = false;
};

// Each backend in turn on the same inputs (the reference, the slow part on the host, computed once).
void check_on_gpu(const GpuCase& c, const std::vector<GemmBackend>& backends, uint64_t seed) {
  SCOPED_TRACE("M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " x=" +
               dtype_name(c.x) + " w=" + dtype_name(c.w) + " y=" + dtype_name(c.y) + " pad=" + std::to_string(c.pad) +
               (c.bias ? " bias" : "") + (c.accumulate ? " accumulate" : ""));
  DeviceOperand x(c.x, {c.M, c.K}, seed, {c.K + c.pad, 1});
  DeviceOperand w(c.w, {c.N, c.K}, seed + 1, {c.K + c.pad, 1}, 0.05f);
  DeviceOperand bias(c.y, {c.N}, seed + 2);  // cuBLASLt's bias is in y's dtype
  DeviceOperand y(c.y, {c.M, c.N}, seed + 3, {c.N + c.pad, 1});
  const std::vector<uint8_t> y_before = y.host;
  const testing::GemmExpected want =
      testing::gemm_expected(x.view, w.view, c.bias ? &bias.view : nullptr, c.accumulate ? &y.view : nullptr, c.y);
  const TensorView bd = bias.device_view();
  for (GemmBackend backend : backends) {
    SCOPED_TRACE(gemm_backend_name(backend));
    y.host = y_before;
    if (!c.accumulate) std::fill(y.host.begin(), y.host.end(), uint8_t(0xFF));  // NaN wherever nothing writes
    y.upload();
    GemmOptions opts;
    opts.accumulate = c.accumulate;
    opts.backend = backend;
    EXPECT_EQ(gemm_cuda(x.device_view(), w.device_view(), c.bias ? &bd : nullptr, y.device_view(), opts), backend);
    synchronize(current_stream());
    y.download();
    EXPECT_EQ(testing::gemm_mismatches(y.view, want), 0);
    EXPECT_TRUE(y.outside_untouched());
  }
}

TEST(GemmCuda, MatchesTheReferenceOnTheGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  const std::vector<GpuCase> cases = {
      {1, 8, 16},
      {77, 130, 200},
      {300, 1000, 2048},                                 // large tiles on a small GPU, small ones on an H200
      {2048, 1024, 512},                                 // large tiles everywhere
      {129, 257, 96, DType::bf16, DType::bf16, DType::bf16, 8, true, true},
      {64, 96, 128, DType::f16, DType::f16, DType::f16, 0, true},
  };
  std::vector<GemmBackend> both = {GemmBackend::ours};
  if (cublaslt_built()) both.push_back(GemmBackend::cublaslt);
  uint64_t seed = 1;
  for (const GpuCase& c : cases) check_on_gpu(c, both, seed += 10);
  // What only ours takes (f32 activations, x and W of different dtypes), and ours's element-wise staging (odd
  // strides, K off the 8-element pieces).
  const std::vector<GpuCase> ours_only = {
      {200, 300, 256, DType::f32, DType::bf16, DType::f32, 0, true},
      {50, 70, 64, DType::f16, DType::bf16, DType::bf16},
      {90, 100, 120, DType::bf16, DType::bf16, DType::f32, 3, true, true},
      {33, 40, 45, DType::f32, DType::f16, DType::f32},
  };
  for (const GpuCase& c : ours_only) check_on_gpu(c, {GemmBackend::ours}, seed += 10);
}

}  // namespace
}  // namespace attnzoo
