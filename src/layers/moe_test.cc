#include "layers/moe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/random_gated_experts.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

TEST(MoeRouting, SoftmaxTopKOrdersAndRenormalizes) {
  // Token 0: expert 2 then 0; token 1: ties between experts 1 and 3 go to the lower index.
  const std::vector<float> logits = {1.f, -1.f, 2.f, 0.f, 0.f, 3.f, -2.f, 3.f};
  MoeRouting r;
  route_softmax_top_k(logits.data(), 2, 4, 2, false, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 0, 1, 3}));
  const double z0 = std::exp(1.0) + std::exp(-1.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(r.weights[0], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(1.0) / z0, 1e-6);
  route_softmax_top_k(logits.data(), 2, 4, 2, true, r);
  EXPECT_NEAR(r.weights[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(r.weights[2] + r.weights[3], 1.0, 1e-6);
  EXPECT_NEAR(r.weights[2], 0.5, 1e-6);
}

struct MoeFixture : testing::RandomGatedExperts {
  int64_t k = 2;
  HostTensor router{DType::f32, {E, H}, 1};
  HostTensor shared_gate{DType::f32, {1, H}, 93};

  MoeFixture() : RandomGatedExperts(/*hidden=*/24, /*width=*/20, /*experts=*/5, /*shared_width=*/12) {}
  SparseMoe build(bool normalize, bool shared) const {
    std::optional<GatedMlp> se;
    std::optional<Linear> sgate;
    if (shared) {
      se.emplace(shared_expert());
      sgate.emplace(Linear::from_weights(shared_gate.view, {}, "sg"));
    }
    return SparseMoe({k, MoeRouter::softmax, normalize}, Linear::from_weights(router.view, {}, "router"),
                     experts(), std::move(se), std::move(sgate), "moe");
  }
  // Plain definition in double: every token through its top-k experts, one at a time.
  static std::vector<double> mlp_ref(const HostTensor& g, const HostTensor& u, const HostTensor& d, const float* x,
                                     int64_t H, int64_t I) {
    std::vector<double> h(static_cast<size_t>(I)), y(static_cast<size_t>(H), 0.0);
    for (int64_t i = 0; i < I; ++i) {
      double a = 0, b = 0;
      for (int64_t j = 0; j < H; ++j) a += double(g.at(i * H + j)) * x[j], b += double(u.at(i * H + j)) * x[j];
      h[size_t(i)] = a / (1 + std::exp(-a)) * b;
    }
    for (int64_t o = 0; o < H; ++o)
      for (int64_t i = 0; i < I; ++i) y[size_t(o)] += double(d.at(o * I + i)) * h[size_t(i)];
    return y;
  }
  std::vector<double> reference(const float* x, int64_t T, bool normalize, bool shared) const {
    std::vector<double> out(static_cast<size_t>(T * H), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * H;
      std::vector<double> p(static_cast<size_t>(E));
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) {
        double l = 0;
        for (int64_t j = 0; j < H; ++j) l += double(router.at(e * H + j)) * xt[j];
        sum += (p[size_t(e)] = std::exp(l));
      }
      std::vector<int64_t> idx;
      std::vector<bool> used(static_cast<size_t>(E), false);
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; ++e)
          if (!used[size_t(e)] && (best < 0 || p[size_t(e)] > p[size_t(best)])) best = e;
        used[size_t(best)] = true;
        idx.push_back(best);
      }
      double chosen = 0;
      for (int64_t e : idx) chosen += p[size_t(e)] / sum;
      for (int64_t e : idx) {
        const double w = p[size_t(e)] / sum / (normalize ? chosen : 1.0);
        const auto y = mlp_ref(gate[size_t(e)], up[size_t(e)], down[size_t(e)], xt, H, I);
        for (int64_t o = 0; o < H; ++o) out[size_t(t * H + o)] += w * y[size_t(o)];
      }
      if (shared) {
        double gl = 0;
        for (int64_t j = 0; j < H; ++j) gl += double(shared_gate.at(j)) * xt[j];
        const auto y = mlp_ref(sg, su, sd, xt, H, S);
        for (int64_t o = 0; o < H; ++o) out[size_t(t * H + o)] += y[size_t(o)] / (1 + std::exp(-gl));
      }
    }
    return out;
  }
};

TEST(SparseMoe, MatchesPlainDefinition) {
  MoeFixture f;
  for (int64_t T : {1, 3, 40}) {  // decode (GEMV experts) and prefill (GEMM experts, parallel over experts)
    HostTensor x(DType::f32, {T, f.H}, 7 + uint64_t(T));
    for (bool normalize : {false, true})
      for (bool shared : {false, true}) {
        const SparseMoe moe = f.build(normalize, shared);
        std::vector<float> got(size_t(T * f.H));
        moe.forward(x.view.ptr<float>(), T, got.data());
        const auto want = f.reference(x.view.ptr<float>(), T, normalize, shared);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << T << " " << normalize << shared << i;
      }
  }
}

TEST(SparseMoe, RejectsBadShapesNamingThem) {
  MoeFixture f;
  HostTensor bad_router(DType::f32, {f.E - 1, f.H}, 3);
  try {
    SparseMoe({2, MoeRouter::softmax, true}, Linear::from_weights(bad_router.view, {}, "r"), f.experts(), {}, {}, "m");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("m.gate.weight"), std::string::npos) << e.what();
  }
  try {
    SparseMoe({f.E + 1, MoeRouter::softmax, true}, Linear::from_weights(f.router.view, {}, "r"), f.experts(), {}, {},
              "m");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("num_experts_per_tok"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
