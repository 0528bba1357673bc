#include "layers/norm.h"

#include <gtest/gtest.h>

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
