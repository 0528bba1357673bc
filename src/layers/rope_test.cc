#include "layers/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <vector>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

void compare_with_reference(const RopeConfig& cfg) {
  Rope rope(cfg);
  const int64_t T = 9, H = 3, stride = H * cfg.head_dim + 5;  // padded token stride
  testing::HostTensor a(DType::f32, {T * stride}, 11), b(DType::f32, {T * stride}, 11);
  std::vector<int32_t> pos = {0, 1, 2, 7, 100, 4095, 5000, 31, 65535};
  rope.apply(a.view.ptr<float>(), T, H, stride, pos.data());
  rope_reference(rope, b.view.ptr<float>(), T, H, stride, pos.data());
  // The fast path rounds each angle to f32 (as transformers does), so its error grows with the position:
  // half an ulp of the angle, times the pair's magnitude (inputs are N(0, 1): |pair| < 8).
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = t * stride; i < (t + 1) * stride; ++i)
      ASSERT_NEAR(a.at(i), b.at(i), 2e-5 * (1 + std::fabs(b.at(i))) + 8 * 6e-8 * pos[size_t(t)]) << i;
  // Channels beyond rotary_dim and the padding pass through untouched.
  testing::HostTensor orig(DType::f32, {T * stride}, 11);
  const int64_t rot = rope.rotary_dim();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = rot; d < cfg.head_dim; ++d) {
        const int64_t i = t * stride + h * cfg.head_dim + d;
        ASSERT_EQ(a.at(i), orig.at(i));
      }
}

TEST(Rope, MatchesReferenceForEveryTypeAndLayout) {
  for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved})
    for (int64_t rotary : {0, 16})
      for (const char* type : {"default", "llama3", "yarn"}) {
        RopeConfig c;
        c.head_dim = 32;
        c.rotary_dim = rotary;
        c.layout = layout;
        c.type = type;
        c.factor = 8.0;
        c.original_max_position_embeddings = 256;
        SCOPED_TRACE(type);
        compare_with_reference(c);
      }
}

// Half-layout rotation from angles() token by token: the products apply() makes, in the same order.
std::vector<float> rotated_by_angles(const Rope& rope, std::vector<float> x, int64_t heads,
                                     const std::vector<int32_t>& pos) {
  const int64_t half = rope.rotary_dim() / 2, D = rope.config().head_dim;
  std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
  for (size_t t = 0; t < pos.size(); ++t) {
    rope.angles(pos[t], c.data(), s.data());
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.data() + (int64_t(t) * heads + h) * D;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[size_t(i)] - b * s[size_t(i)];
        v[i + half] = b * c[size_t(i)] + a * s[size_t(i)];
      }
    }
  }
  return x;
}

// apply() keeps the last cos / sin table it computed on the thread for the next call at the same positions with
// the same frequencies and scale (every layer of a forward): other frequencies, another attention scale over the
// same frequencies, a changed position or fewer tokens must each get their own angles, bit for bit.
TEST(Rope, AngleTableServesOnlyTheSamePositionsAndFrequencies) {
  RopeConfig base;
  base.head_dim = 16;
  RopeConfig other_theta = base;
  other_theta.theta = 500.0;
  RopeConfig other_scale = base;  // longrope with unit factors: base's frequencies, a 1.5 attention scale
  other_scale.type = "longrope";
  other_scale.ext_factors.assign(8, 1.0);
  other_scale.attention_factor = 1.5;
  const Rope a(base), b(other_theta), c(other_scale);
  ASSERT_EQ(a.inv_freq(), c.inv_freq());
  const int64_t H = 2;
  const std::vector<int32_t> p = {3, 4, 5, 6, 90}, moved = {3, 4, 5, 7, 90}, fewer = {3, 4, 5};
  struct Call {
    const Rope* rope;
    const std::vector<int32_t>* pos;
  };
  const Call calls[] = {{&a, &p}, {&a, &p}, {&c, &p}, {&b, &p}, {&a, &moved}, {&a, &fewer}, {&a, &p}};
  for (size_t i = 0; i < std::size(calls); ++i) {
    const auto& [rope, pos] = calls[i];
    const int64_t T = int64_t(pos->size());
    testing::HostTensor x(DType::f32, {T * H * 16}, 40 + i);
    const std::vector<float> in(x.view.ptr<float>(), x.view.ptr<float>() + T * H * 16);
    std::vector<float> got = in;
    rope->apply(got.data(), T, H, H * 16, pos->data());
    ASSERT_EQ(got, rotated_by_angles(*rope, in, H, *pos)) << "call " << i;
  }
}

TEST(Rope, DefaultFrequenciesAndRotationByHand) {
  RopeConfig c;
  c.head_dim = 4;
  c.theta = 100.0;
  Rope rope(c);
  ASSERT_EQ(rope.inv_freq().size(), 2u);
  EXPECT_FLOAT_EQ(rope.inv_freq()[0], 1.f);
  EXPECT_FLOAT_EQ(rope.inv_freq()[1], 0.1f);  // 100^(-2/4)
  float x[4] = {1.f, 2.f, 3.f, 4.f};
  const int32_t pos = 3;
  rope.apply(x, 1, 1, 4, &pos);
  // Half layout pairs (x0, x2) at angle 3 and (x1, x3) at angle 0.3.
  EXPECT_NEAR(x[0], 1 * std::cos(3.0) - 3 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(x[2], 3 * std::cos(3.0) + 1 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(x[1], 2 * std::cos(0.3) - 4 * std::sin(0.3), 1e-5);
  EXPECT_NEAR(x[3], 4 * std::cos(0.3) + 2 * std::sin(0.3), 1e-5);
}

TEST(Rope, Llama3LeavesHighFrequenciesAndDividesLowOnes) {
  RopeConfig c;
  c.head_dim = 64;
  c.theta = 500000.0;
  c.type = "llama3";
  c.factor = 8.0;
  c.original_max_position_embeddings = 8192;
  Rope rope(c), plain(RopeConfig{.head_dim = 64, .theta = 500000.0});
  EXPECT_FLOAT_EQ(rope.inv_freq()[0], plain.inv_freq()[0]);          // wavelength 2*pi < 8192/4
  EXPECT_FLOAT_EQ(rope.inv_freq()[31], plain.inv_freq()[31] / 8.f);  // wavelength far above 8192
}

TEST(Rope, LinearScalingIsPositionInterpolation) {
  RopeConfig c{.head_dim = 32, .theta = 10000.0};
  c.type = "linear";
  c.factor = 4.0;
  Rope rope(c), plain(RopeConfig{.head_dim = 32, .theta = 10000.0});
  for (size_t i = 0; i < rope.inv_freq().size(); ++i)
    EXPECT_FLOAT_EQ(rope.inv_freq()[i], plain.inv_freq()[i] / 4.f);  // angle at position p == plain at p / 4
}

TEST(Rope, YarnScalesCosSinByTheAttentionFactor) {
  RopeConfig c;
  c.head_dim = 16;
  c.type = "yarn";
  c.factor = 4.0;
  c.original_max_position_embeddings = 128;
  Rope rope(c);
  EXPECT_NEAR(rope.attention_scale(), 0.1 * std::log(4.0) + 1.0, 1e-6);
  float cs[8], sn[8];
  rope.angles(0, cs, sn);
  EXPECT_NEAR(cs[0], rope.attention_scale(), 1e-6);
}

TEST(Rope, RejectsBadConfigByName) {
  RopeConfig c;
  c.head_dim = 16;
  c.type = "dynamic";
  EXPECT_THROW(Rope{c}, ArgumentError);
  c.type = "default";
  c.rotary_dim = 7;
  EXPECT_THROW(Rope{c}, ArgumentError);
}

}  // namespace
}  // namespace attnzoo
