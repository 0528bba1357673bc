#include "layers/layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(LayerNorm, MatchesReferenceForOddSizesGroupsAndOffsets) {
  for (auto [groups, group_dim] : {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {1, 64}, {4, 16}, {3, 33}}) {
    const int64_t rows = 5, dim = groups * group_dim;
    testing::HostTensor x(DType::f32, {rows * dim}, 1, 3.f), w(DType::bf16, {dim}, 2), b(DType::f32, {dim}, 3);
    // A large common offset: a one-pass variance would cancel catastrophically here.
    for (int64_t i = 0; i < rows * dim; ++i) x.view.ptr<float>()[i] += 100.f;
    for (bool with_bias : {false, true}) {
      LayerNorm norm(w.view, with_bias ? b.view : TensorView{}, 1e-5f, "n", groups);
      std::vector<float> got(size_t(rows * dim)), want(size_t(rows * dim)), wf(static_cast<size_t>(dim));
      for (int64_t i = 0; i < dim; ++i) wf[size_t(i)] = w.at(i);
      norm.forward(x.view.ptr<float>(), rows, got.data());
      layer_norm_reference(x.view.ptr<float>(), rows, groups, group_dim, wf.data(),
                           with_bias ? b.view.ptr<float>() : nullptr, 1e-5f, want.data());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-4 * (1 + std::fabs(want[i])));
    }
  }
}

TEST(LayerNorm, NormalisesEachGroupToZeroMeanUnitVariance) {
  std::vector<float> w(4, 1.f), x = {1.f, 3.f, 10.f, 30.f}, y(4);
  LayerNorm norm(TensorView::contiguous(w.data(), DType::f32, {4}), {}, 0.f, "n", 2);
  norm.forward(x.data(), 1, y.data());
  EXPECT_NEAR(y[0], -1.f, 1e-6);
  EXPECT_NEAR(y[1], 1.f, 1e-6);
  EXPECT_NEAR(y[2], -1.f, 1e-6);
  EXPECT_NEAR(y[3], 1.f, 1e-6);
}

TEST(LayerNorm, RejectsBadShapesNamingTheTensor) {
  std::vector<float> w(6, 1.f), b(5, 0.f);
  const TensorView wv = TensorView::contiguous(w.data(), DType::f32, {6});
  try {
    LayerNorm(wv, TensorView::contiguous(b.data(), DType::f32, {5}), 1e-5f, "model.norm");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm.bias"), std::string::npos);
  }
  EXPECT_THROW(LayerNorm(wv, {}, 1e-5f, "g", 4), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
