#include "layers/linear.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

struct Case {
  int64_t T, N, K;
  DType dtype;
  bool bias;
};

void check_case(const Case& c, int path) {
  HostTensor w(c.dtype, {c.N, c.K}, 1 + uint64_t(c.N * 7 + c.K), 0.5f);
  HostTensor x(DType::f32, {c.T, c.K}, 2 + uint64_t(c.T), 1.f);
  HostTensor b(DType::f32, {c.N}, 3, 1.f);
  const float* bias = c.bias ? b.view.ptr<float>() : nullptr;
  std::vector<float> got(size_t(c.T * c.N), -1.f), want(size_t(c.T * c.N));
  linear_reference(w.view, bias, x.view.ptr<float>(), c.T, want.data(), c.N);
  if (path == 0) linear_gemv(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N);
  if (path == 1) linear_gemm(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N, LinearGemmBackend::openblas);
  if (path == 2) linear_gemm(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N, LinearGemmBackend::tile);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  EXPECT_LT(err, 2e-4 * std::sqrt(double(c.K))) << "T=" << c.T << " N=" << c.N << " K=" << c.K << " path " << path
                                                << " dtype " << dtype_name(c.dtype);
}

TEST(Linear, GemvMatchesReferenceOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (DType dt : {DType::f32, DType::bf16})
      for (int64_t T : {1, 2, 5, 8, 11})  // 11: split into 8 + 3
        for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 3}, {33, 70}, {130, 64}, {64, 257}})
          check_case({T, N, K, dt, T % 2 == 1}, 0);
  });
}

TEST(Linear, GemmMatchesReferenceOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (DType dt : {DType::f32, DType::bf16})
      for (int path : {1, 2})
        for (int64_t T : {9, 40, 200})
          for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{7, 3}, {33, 70}, {130, 64}, {250, 129}})
            check_case({T, N, K, dt, N % 2 == 1}, path);
  });
}

TEST(Linear, F16WeightsAreWidenedOnceAndBf16StoreRounds) {
  HostTensor w16(DType::f16, {24, 40}, 5, 0.5f);
  Linear l = Linear::from_weights(w16.view, {}, "w16");
  EXPECT_TRUE(l.owns_weight());
  EXPECT_EQ(l.weight().dtype, DType::f32);
  HostTensor w32(DType::f32, {24, 40}, 6, 0.5f);
  EXPECT_FALSE(Linear::from_weights(w32.view, {}, "w32").owns_weight());  // borrowed
  Linear lb = Linear::from_weights(w32.view, {}, "w32", DType::bf16);
  EXPECT_TRUE(lb.owns_weight());
  EXPECT_EQ(lb.weight().dtype, DType::bf16);
  HostTensor x(DType::f32, {3, 40}, 7);
  std::vector<float> got(3 * 24), want(3 * 24);
  l.forward(x.view.ptr<float>(), 3, got.data());
  linear_reference(w16.view, nullptr, x.view.ptr<float>(), 3, want.data(), 24);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4);
}

TEST(Linear, RejectsBadWeightsByName) {
  HostTensor w3(DType::f32, {2, 3, 4}, 1);
  try {
    Linear::from_weights(w3.view, {}, "layer.q_proj");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("layer.q_proj"), std::string::npos);
  }
  HostTensor w(DType::f32, {4, 3}, 1), b(DType::f32, {5}, 2);
  EXPECT_THROW(Linear::from_weights(w.view, b.view, "b"), ArgumentError);
  HostTensor wi(DType::i32, {4, 3}, 1, 0.f);
  EXPECT_THROW(Linear::from_weights(wi.view, {}, "i"), DTypeError);
}

// Run by hand: test_layers --gtest_also_run_disabled_tests --gtest_filter='*Bench*'. Chooses the prefill backend.
TEST(Linear, DISABLED_BenchPrefillGemmBackends) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const int64_t T = 256, N = 2048, K = 1024;
    HostTensor w(dt, {N, K}, 1, 0.1f), x(DType::f32, {T, K}, 2);
    std::vector<float> y(size_t(T * N));
    for (int path = 1; path <= 2; ++path) {
      auto backend = path == 1 ? LinearGemmBackend::openblas : LinearGemmBackend::tile;
      linear_gemm(w.view, nullptr, x.view.ptr<float>(), T, y.data(), N, backend);
      const auto t0 = std::chrono::steady_clock::now();
      const int reps = 5;
      for (int r = 0; r < reps; ++r) linear_gemm(w.view, nullptr, x.view.ptr<float>(), T, y.data(), N, backend);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("%s %s: %.2f ms, %.1f GFLOP/s\n", dtype_name(dt), path == 1 ? "openblas" : "tile", s * 1e3,
                  2.0 * T * N * K / s * 1e-9);
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 20; ++r) linear_gemv(w.view, nullptr, x.view.ptr<float>(), 1, y.data(), N);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20;
    std::printf("%s gemv T=1: %.3f ms, %.1f GB/s\n", dtype_name(dt), s * 1e3, double(N * K * dtype_size(dt)) / s * 1e-9);
  }
}

}  // namespace
}  // namespace attnzoo
