#include "layers/mlp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

const float* f32(const HostTensor& t) { return static_cast<const float*>(t.view.data); }

// PlainMlp (Nemotron-H's MLP) against its definition in double: out = down(relu(up(x))^2), token by token, on an
// odd token count and widths that leave vector tails.
TEST(PlainMlp, MatchesTheDefinitionInDouble) {
  const int64_t T = 5, H = 19, I = 37;
  const HostTensor up(DType::f32, {I, H}, 1, 0.4f), down(DType::f32, {H, I}, 2, 0.4f), x(DType::f32, {T, H}, 3);
  const PlainMlp mlp(Linear::from_weights(up.view, {}, "up"), Linear::from_weights(down.view, {}, "down"),
                     Activation::relu2, "mlp");
  EXPECT_EQ(mlp.weight_bytes(), uint64_t(2 * H * I * 4));
  std::vector<float> got(size_t(T * H));
  mlp.forward(f32(x), T, got.data());
  int negative = 0;  // relu must really cut: some pre-activations are negative
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> h(static_cast<size_t>(I));
    for (int64_t i = 0; i < I; ++i) {
      double a = 0;
      for (int64_t k = 0; k < H; ++k) a += double(f32(up)[i * H + k]) * f32(x)[t * H + k];
      negative += a < 0;
      h[size_t(i)] = std::max(a, 0.0) * std::max(a, 0.0);
    }
    for (int64_t o = 0; o < H; ++o) {
      double want = 0;
      for (int64_t i = 0; i < I; ++i) want += double(f32(down)[o * I + i]) * h[size_t(i)];
      EXPECT_NEAR(got[size_t(t * H + o)], want, 1e-4 * (1 + std::abs(want))) << "t=" << t << " o=" << o;
    }
  }
  EXPECT_GT(negative, T * I / 4);
}

TEST(PlainMlp, ShapesThatDoNotChainAreNamed) {
  const HostTensor up(DType::f32, {8, 4}, 1), down(DType::f32, {4, 6}, 2);
  try {
    PlainMlp(Linear::from_weights(up.view, {}, "up"), Linear::from_weights(down.view, {}, "down"), Activation::relu2,
             "layer.mlp");
    FAIL() << "accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("layer.mlp.up_proj.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
