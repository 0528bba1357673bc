#include "layers/gpt_oss_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

TEST(GptOssRouting, TopKThenSoftmaxOverTheChosen) {
  // Token 0: experts 2 then 0; token 1: the tie between experts 1 and 3 goes to the lower index.
  const std::vector<float> logits = {1.f, -1.f, 2.f, 0.f, 0.f, 3.f, -2.f, 3.f};
  MoeRouting r;
  route_top_k_softmax(logits.data(), 2, 4, 2, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 0, 1, 3}));
  EXPECT_NEAR(r.weights[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(1.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(r.weights[2], 0.5, 1e-6);
  EXPECT_NEAR(r.weights[3], 0.5, 1e-6);
}

TEST(GptOssActivation, ClampsGateAboveAndUpBothSides) {
  const float alpha = 1.702f, limit = 7.f;
  const std::vector<float> gate = {-3.f, 0.5f, 9.f, 2.f}, up = {0.25f, -8.f, 1.f, 12.f};
  std::vector<float> h(4);
  gpt_oss_clamped_swiglu(gate.data(), up.data(), alpha, limit, h.data(), 4);
  auto want = [&](double g, double u) {
    g = std::min(g, double(limit));
    u = std::clamp(u, -double(limit), double(limit));
    return (u + 1) * g / (1 + std::exp(-alpha * g));
  };
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(h[size_t(i)], want(gate[size_t(i)], up[size_t(i)]), 1e-5) << i;
  EXPECT_NEAR(h[1], -6.0 * 0.5 / (1 + std::exp(-alpha * 0.5)), 1e-5);  // up clamped to -7
  EXPECT_NEAR(h[2], 2.0 * 7.0 / (1 + std::exp(-alpha * 7.0)), 1e-5);   // gate clamped to 7
}

struct Fixture {
  int64_t H = 24, I = 20, E = 5, k = 2;
  HostTensor router{DType::f32, {E, H}, 1, 0.5f}, router_bias{DType::f32, {E}, 2, 0.5f};
  HostTensor gate_up, gate_up_bias{DType::f32, {E, 2 * I}, 4, 0.5f}, down, down_bias{DType::f32, {E, H}, 6, 0.5f};

  explicit Fixture(DType dt, int64_t hidden = 24, int64_t inter = 20)
      : H(hidden), I(inter), gate_up(dt, {E, H, 2 * I}, 3, 0.6f), down(dt, {E, I, H}, 5, 0.4f) {}

  GptOssMoe build(DType store = DType::f32) const {
    return GptOssMoe({k, 1.702f, 7.f}, Linear::from_weights(router.view, router_bias.view, "router"),
                     {gate_up.view, gate_up_bias.view, down.view, down_bias.view}, store, "moe");
  }
  // Plain definition in double, straight from the fused, interleaved, x @ W layout.
  std::vector<double> reference(const float* x, int64_t T) const {
    std::vector<double> out(size_t(T * H), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * H;
      std::vector<double> l(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) {
        double s = router_bias.at(e);
        for (int64_t j = 0; j < H; ++j) s += double(router.at(e * H + j)) * xt[j];
        l[size_t(e)] = s;
      }
      std::vector<int64_t> order(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[size_t(a)] > l[size_t(b)]; });
      double z = 0;
      for (int64_t j = 0; j < k; ++j) z += std::exp(l[size_t(order[size_t(j)])] - l[size_t(order[0])]);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = order[size_t(j)];
        const double w = std::exp(l[size_t(e)] - l[size_t(order[0])]) / z;
        std::vector<double> h(static_cast<size_t>(I));
        for (int64_t i = 0; i < I; ++i) {
          double g = gate_up_bias.at(e * 2 * I + 2 * i), u = gate_up_bias.at(e * 2 * I + 2 * i + 1);
          for (int64_t c = 0; c < H; ++c) {
            g += double(gate_up.at((e * H + c) * 2 * I + 2 * i)) * xt[c];
            u += double(gate_up.at((e * H + c) * 2 * I + 2 * i + 1)) * xt[c];
          }
          g = std::min(g, 7.0);
          u = std::clamp(u, -7.0, 7.0);
          h[size_t(i)] = (u + 1) * g / (1 + std::exp(-1.702 * g));
        }
        for (int64_t o = 0; o < H; ++o) {
          double y = down_bias.at(e * H + o);
          for (int64_t i = 0; i < I; ++i) y += double(down.at((e * I + i) * H + o)) * h[size_t(i)];
          out[size_t(t * H + o)] += w * y;
        }
      }
    }
    return out;
  }
};

TEST(GptOssMoe, MatchesReferenceOnEveryTarget) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Fixture f(dt);
    const GptOssMoe moe = f.build();
    EXPECT_EQ(moe.num_experts(), 5);
    EXPECT_EQ(moe.intermediate(), 20);
    EXPECT_GT(moe.owned_weight_bytes(), 0u);
    // Decode-sized (GEMV) and prefill-sized (GEMM) token counts.
    for (int64_t T : {1, 3, 37}) {
      HostTensor x(DType::f32, {T, f.H}, 100 + T);
      const auto want = f.reference(x.view.ptr<float>(), T);
      testing::for_each_target([&](Target target) {
        std::vector<float> got(size_t(T * f.H));
        moe.forward(x.view.ptr<float>(), T, got.data());
        double err = 0, scale = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          err = std::max(err, std::fabs(got[i] - want[i]));
          scale = std::max(scale, std::fabs(want[i]));
        }
        EXPECT_GT(scale, 0.5) << target_name(target);
        EXPECT_LT(err, 2e-5 * std::max(1.0, scale)) << target_name(target) << " T=" << T << " " << dtype_name(dt);
      });
    }
  }
}

TEST(GptOssMoe, Bf16StorageRoundsOnce) {
  Fixture f(DType::f32);
  const GptOssMoe moe = f.build(DType::bf16);
  EXPECT_EQ(moe.owned_weight_bytes(), uint64_t(f.E) * uint64_t(3 * f.I * f.H) * 2);
  const int64_t T = 9;
  HostTensor x(DType::f32, {T, f.H}, 7);
  const auto want = f.reference(x.view.ptr<float>(), T);
  std::vector<float> got(size_t(T * f.H));
  moe.forward(x.view.ptr<float>(), T, got.data());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  const double rel = std::sqrt(num / den);
  EXPECT_GT(rel, 0.0);
  EXPECT_LT(rel, 2e-2);
}

TEST(GptOssMoe, RejectsBadShapesNamingTheTensor) {
  Fixture f(DType::f32);
  auto expect_error = [&](const GptOssExpertTensors& t, int64_t k, const std::string& needle) {
    try {
      GptOssMoe({k, 1.702f, 7.f}, Linear::from_weights(f.router.view, f.router_bias.view, "router"), t, DType::f32,
                "moe");
      FAIL() << "no error for " << needle;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const GptOssExpertTensors good{f.gate_up.view, f.gate_up_bias.view, f.down.view, f.down_bias.view};
  GptOssExpertTensors t = good;
  HostTensor short_down(DType::f32, {f.E, f.I - 1, f.H}, 9);
  t.down = short_down.view;
  expect_error(t, 2, "moe.experts.down_proj");
  t = good;
  HostTensor bias(DType::f32, {f.E, 2 * f.I + 2}, 9);
  t.gate_up_bias = bias.view;
  expect_error(t, 2, "moe.experts.gate_up_proj_bias");
  expect_error(good, 6, "num_experts_per_tok");
}

// Experts given as MXFP4 projections (the released checkpoints' format): the same layer as over the dense fused
// tensors holding their dequantized values, which the double reference runs on.
TEST(GptOssMoe, Mxfp4ExpertsMatchTheirDequantizedValues) {
  Fixture f(DType::f32, 64, 32);  // whole 32-value blocks; gate_up / down are overwritten with the MXFP4 values
  const int64_t E = f.E, H = f.H, I = f.I;
  std::vector<GptOssExpert> experts;
  std::vector<std::vector<uint8_t>> keep;
  std::vector<float> rows(size_t(H * I)), bias(size_t(std::max(H, I)));
  for (int64_t e = 0; e < E; ++e) {
    auto proj = [&](int64_t out, int64_t in, uint64_t seed, auto&& set_weight, auto&& get_bias, const char* name) {
      keep.push_back(testing::random_quant_rows(QuantType::MXFP4, out, in, seed));
      dequantize_row_reference(QuantType::MXFP4, keep.back().data(), rows.data(), out * in);
      for (int64_t o = 0; o < out; ++o) {
        bias[size_t(o)] = get_bias(o);
        for (int64_t c = 0; c < in; ++c) set_weight(o, c, rows[size_t(o * in + c)]);
      }
      return Linear::from_quantized(keep.back().data(), keep.back().size(), QuantType::MXFP4, out, in,
                                    TensorView::contiguous(bias.data(), DType::f32, {out}), name);
    };
    float* gu = f.gate_up.view.ptr<float>() + e * H * 2 * I;
    float* dn = f.down.view.ptr<float>() + e * I * H;
    auto gu_bias = [&](int64_t col) { return f.gate_up_bias.at(e * 2 * I + col); };
    Linear gate = proj(I, H, 10 * e + 1, [&](int64_t o, int64_t c, float v) { gu[c * 2 * I + 2 * o] = v; },
                       [&](int64_t o) { return gu_bias(2 * o); }, "gate");
    Linear up = proj(I, H, 10 * e + 2, [&](int64_t o, int64_t c, float v) { gu[c * 2 * I + 2 * o + 1] = v; },
                     [&](int64_t o) { return gu_bias(2 * o + 1); }, "up");
    Linear down = proj(H, I, 10 * e + 3, [&](int64_t o, int64_t c, float v) { dn[c * H + o] = v; },
                       [&](int64_t o) { return f.down_bias.at(e * H + o); }, "down");
    experts.push_back({std::move(gate), std::move(up), std::move(down)});
  }
  const GptOssMoe moe({f.k, 1.702f, 7.f}, Linear::from_weights(f.router.view, f.router_bias.view, "router"),
                      std::move(experts), nullptr, "moe");
  EXPECT_EQ(moe.owned_weight_bytes(), 0u);
  EXPECT_EQ(moe.weight_bytes(), f.router.view.numel() * 4 + uint64_t(E) * 3 * (H * I / 32) * 17);
  const ScopedMatmulPrecision highest(MatmulPrecision::highest);  // f32 products: the reference's values exactly
  for (int64_t T : {1, 5, 19}) {
    HostTensor x(DType::f32, {T, H}, 200 + T);
    const auto want = f.reference(x.view.ptr<float>(), T);
    std::vector<float> got(size_t(T * H));
    moe.forward(x.view.ptr<float>(), T, got.data());
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, std::fabs(got[i] - want[i]));
      scale = std::max(scale, std::fabs(want[i]));
    }
    EXPECT_GT(scale, 0.5);
    EXPECT_LT(err, 2e-5 * std::max(1.0, scale)) << "T=" << T;
  }
}

}  // namespace
}  // namespace attnzoo
