#include "layers/activations.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "testing/test_util.h"

namespace attnzoo {
namespace {

constexpr Activation kAll[] = {Activation::silu, Activation::gelu_tanh, Activation::gelu, Activation::relu2};

// The definitions again in double, to show the vector forms are no further from the truth than the f32 reference.
double activation_exact(Activation a, double x) {
  switch (a) {
    case Activation::silu: return x / (1 + std::exp(-x));
    case Activation::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::relu2: return x > 0 ? x * x : 0.0;
    default: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  }
}

// Dense grids, magnitudes from subnormal to 150, signed zeros, and the neighbourhoods of every point where a
// kernel changes formula or clamps: 0 (gelu's branch), +-14 (gelu's clamp), ~-8.6 (gelu_tanh's exponent clamp),
// +-88 (silu's clamp), +-104 (the bound of Highway's Exp).
std::vector<float> sweep_inputs() {
  std::vector<float> xs;
  for (int i = -20000; i <= 20000; ++i) xs.push_back(float(i) * 1e-3f);
  for (int i = -10000; i <= 10000; ++i) xs.push_back(float(i) * 1e-2f);
  for (int i = -20000; i <= 0; ++i) xs.push_back(-8.f + float(i) * 1e-4f);
  for (int e = -45; e <= 2; ++e)
    for (int m = 0; m < 64; ++m) {
      const float v = std::pow(10.f, float(e) + float(m) / 64.f);
      xs.push_back(v);
      xs.push_back(-v);
    }
  for (float c : {0.f, 14.f, 88.f, 104.f, 150.f, 1e-38f})
    for (float s : {1.f, -1.f}) {
      float v = s * c;
      for (int k = 0; k < 8; ++k) v = std::nextafter(v, -INFINITY);
      for (int k = 0; k < 16; ++k, v = std::nextafter(v, INFINITY)) xs.push_back(v);
    }
  xs.push_back(0.f);
  xs.push_back(-0.f);
  xs.push_back(std::numeric_limits<float>::denorm_min());
  xs.push_back(-std::numeric_limits<float>::denorm_min());
  return xs;
}

bool within(double got, double want) { return std::fabs(got - want) <= std::max(2e-6 * std::fabs(want), 1e-6); }

TEST(Activations, VectorFormsMatchTheReferenceOverADenseSweep) {
  const std::vector<float> xs = sweep_inputs();
  testing::for_each_target([&](Target t) {
    for (Activation a : kAll) {
      SCOPED_TRACE(activation_name(a));
      std::vector<float> y = xs;
      apply_activation_inplace(a, y.data(), int64_t(y.size()));
      double max_rel = 0, max_abs_small = 0, max_rel_exact = 0;
      int failures = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const double want = activation_reference(a, xs[i]), exact = activation_exact(a, xs[i]);
        const double err = std::fabs(double(y[i]) - want);
        if (std::fabs(want) >= 0.5) {
          max_rel = std::max(max_rel, err / std::fabs(want));
          max_rel_exact = std::max(max_rel_exact, std::fabs(y[i] - exact) / std::fabs(exact));
        } else {
          max_abs_small = std::max(max_abs_small, err);
        }
        if ((!within(y[i], want) || !within(y[i], exact)) && ++failures <= 5)
          ADD_FAILURE() << "x=" << xs[i] << " got " << y[i] << " reference " << want << " exact " << exact;
        // act(-0) keeps the sign, except a square's
        if (xs[i] == 0.f && a != Activation::relu2) EXPECT_EQ(std::signbit(y[i]), std::signbit(xs[i])) << "act(" << xs[i] << ")";
      }
      EXPECT_EQ(failures, 0);
      std::printf("[%s %s] max rel err %.2e (|y| >= 0.5; vs exact %.2e), max abs err %.2e (|y| < 0.5), %zu inputs\n",
                  target_name(t), activation_name(a), max_rel, max_rel_exact, max_abs_small, xs.size());
    }
  });
}

TEST(Activations, GatedFormMatchesTheReferenceInPlaceAndOnEveryTail) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 4.f);
  testing::for_each_target([&](Target) {
    for (Activation a : kAll) {
      SCOPED_TRACE(activation_name(a));
      for (int64_t n : {0, 1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 47, 100}) {
        std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n));
        for (auto& v : g) v = dist(rng);
        for (auto& v : u) v = dist(rng);
        std::vector<float> out(static_cast<size_t>(n) + 1, 123.f), in_gate = g, in_up = u;
        gated_activation(a, g.data(), u.data(), out.data(), n);
        gated_activation(a, in_gate.data(), u.data(), in_gate.data(), n);  // out aliases gate (the MLP's use)
        gated_activation(a, g.data(), in_up.data(), in_up.data(), n);      // out aliases up (Mamba-2's use)
        for (size_t i = 0; i < size_t(n); ++i) {
          const double want = double(activation_reference(a, g[i])) * u[i];
          const double tol = std::max(2e-6 * std::fabs(want), 1e-6 * std::max(1.f, std::fabs(u[i])));
          ASSERT_NEAR(out[i], want, tol) << "n=" << n << " i=" << i << " gate=" << g[i];
          ASSERT_EQ(in_gate[i], out[i]);
          ASSERT_EQ(in_up[i], out[i]);
        }
        EXPECT_EQ(out[size_t(n)], 123.f) << "wrote past n=" << n;
      }
    }
  });
}

TEST(Activations, InPlaceLeavesElementsPastTheEndAlone) {
  testing::for_each_target([&](Target) {
    for (int64_t n : {1, 5, 9, 17, 35}) {
      std::vector<float> x(static_cast<size_t>(n) + 3, 2.f);
      apply_activation_inplace(Activation::gelu, x.data(), n);
      for (size_t i = 0; i < size_t(n); ++i) ASSERT_NEAR(x[i], activation_reference(Activation::gelu, 2.f), 1e-6);
      for (size_t i = size_t(n); i < x.size(); ++i) ASSERT_EQ(x[i], 2.f);
    }
  });
}

// One-off measurement (--gtest_also_run_disabled_tests): SwiGLU over a 512 x 3072 prefill block, one thread.
TEST(Activations, DISABLED_GatedSiluSpeed) {
  const int64_t rows = 512, cols = 3072, n = rows * cols;
  testing::HostTensor g(DType::f32, {n}, 1, 3.f), u(DType::f32, {n}, 2);
  std::vector<float> out(static_cast<size_t>(n));
  const float* gp = g.view.ptr<float>();
  const float* up = u.view.ptr<float>();
  auto best_ms = [&](auto&& fn) {
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  const double scalar_ms = best_ms([&] {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = activation_reference(Activation::silu, gp[i]) * up[i];
  });
  testing::for_each_target([&](Target t) {
    const double ms = best_ms([&] {
      for (int64_t r = 0; r < rows; ++r)
        gated_activation(Activation::silu, gp + r * cols, up + r * cols, out.data() + r * cols, cols);
    });
    std::printf("gated silu %lld x %lld: scalar reference %.2f ms, %s %.2f ms (%.1fx)\n", (long long)rows,
                (long long)cols, scalar_ms, target_name(t), ms, scalar_ms / ms);
  });
}

}  // namespace
}  // namespace attnzoo
