#include "layers/norm.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "layers/activations.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(RmsNorm, MatchesReferenceForOddSizesAndStrides) {
  for (int64_t dim : {1, 7, 64, 129}) {
    const int64_t rows = 5, xs = dim + 3;
    testing::HostTensor x(DType::f32, {rows * xs}, 1, 3.f), w(DType::bf16, {dim}, 2);
    RmsNorm norm(w.view, 1e-5f, false, "n");
    std::vector<float> got(size_t(rows * dim)), want(size_t(rows * dim));
    norm.forward(x.view.ptr<float>(), rows, xs, got.data(), dim);
    rms_norm_reference(x.view.ptr<float>(), rows, dim, xs, norm.weight().data(), 1e-5f, want.data(), dim);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
  }
}

// The order the portable loop summed in before rms_norm was dispatched per target: eight partial sums (element i
// into sum i % 8), then the tail, then the eight sums in order; every product rounded before it is added.
void rms_norm_eight_sums(const float* x, int64_t dim, const float* w, float eps, float* y) {
  volatile float part[8] = {};  // volatile: no vectorizing or fusing of this statement of the order
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float sq = x[i + j] * x[i + j];
      part[j] = part[j] + sq;
    }
  volatile float ss = 0.f;
  for (; i < dim; ++i) {
    const float sq = x[i] * x[i];
    ss = ss + sq;
  }
  for (int j = 0; j < 8; ++j) ss = ss + part[j];
  const float inv = 1.f / std::sqrt(ss / float(dim) + eps);
  for (int64_t k = 0; k < dim; ++k) {
    const volatile float xn = x[k] * inv;
    y[k] = w[k] * xn;
  }
}

// Every target gives the bits of that order (the models' results do not move with the dispatch), rows with
// strides, dims with and without a tail.
TEST(RmsNorm, EveryTargetGivesTheBitsOfTheEightSumOrder) {
  testing::for_each_target([](Target target) {
    for (int64_t dim : {1, 7, 8, 64, 129, 1024}) {
      const int64_t rows = 3, xs = dim + 5, ys = dim + 2;
      testing::HostTensor x(DType::f32, {rows * xs}, 11, 3.f), w(DType::f32, {dim}, 12);
      std::vector<float> got(size_t(rows * ys), -1.f), want(got);
      rms_norm(x.view.ptr<float>(), rows, dim, xs, w.view.ptr<float>(), 1e-6f, got.data(), ys);
      for (int64_t r = 0; r < rows; ++r)
        rms_norm_eight_sums(x.view.ptr<float>() + r * xs, dim, w.view.ptr<float>(), 1e-6f, want.data() + r * ys);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << target_name(target) << " dim " << dim;
    }
  });
}

TEST(RmsNorm, AddOneFormFoldsTheOffsetAndNormalisesToUnitRms) {
  std::vector<float> w = {0.f, 0.f, 0.f, 0.f};
  RmsNorm norm(TensorView::contiguous(w.data(), DType::f32, {4}), 0.f, true, "n");
  std::vector<float> x = {2.f, -2.f, 2.f, -2.f}, y(4);
  norm.forward(x.data(), 1, 4, y.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[size_t(i)], x[size_t(i)] / 2.f);
}

TEST(Activations, MatchDefinitions) {
  for (float x : {-6.f, -1.f, -0.1f, 0.f, 0.5f, 3.f}) {
    EXPECT_NEAR(apply_activation(Activation::silu, x), x / (1 + std::exp(-double(x))), 1e-6);
    EXPECT_NEAR(apply_activation(Activation::gelu, x), 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-6);
    const double t = std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
    EXPECT_NEAR(apply_activation(Activation::gelu_tanh, x), 0.5 * x * (1 + t), 1e-6);
  }
  std::vector<float> g = {1.f, -2.f}, u = {3.f, 4.f}, o(2);
  gated_activation(Activation::silu, g.data(), u.data(), o.data(), 2);
  EXPECT_NEAR(o[1], -2.0 / (1 + std::exp(2.0)) * 4.0, 1e-6);
  EXPECT_EQ(parse_activation("gelu_pytorch_tanh"), Activation::gelu_tanh);
  EXPECT_EQ(parse_activation("relu2"), Activation::relu2);
  EXPECT_THROW(parse_activation("relu3"), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
