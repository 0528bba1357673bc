// Causal short convolution: vectorised kernel against the double reference on every target; decode steps
// through causal_conv1d_update reproduce the prefill.
#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct ConvCase {
  int64_t B = 1, T = 10, D = 64, W = 4, S = 0;  // S = 0: no state
  std::vector<int32_t> cu;
  bool bias = true;
  ConvActivation act = ConvActivation::none;
  DType dtype = DType::f32;
};

void check(const ConvCase& c) {
  SCOPED_TRACE("T=" + std::to_string(c.T) + " D=" + std::to_string(c.D) + " W=" + std::to_string(c.W) +
               " S=" + std::to_string(c.S));
  const int64_t N = c.cu.empty() ? c.B : int64_t(c.cu.size()) - 1;
  HostTensor x(c.dtype, {c.B, c.T, c.D}, 1), w(c.dtype, {c.D, c.W}, 2), b(c.dtype, {c.D}, 3);
  HostTensor h0(DType::f32, {N, c.D, std::max<int64_t>(c.S, 1)}, 4);
  HostTensor y_ref(c.dtype, {c.B, c.T, c.D}, 0, 0.f), y(c.dtype, {c.B, c.T, c.D}, 0, 0.f);
  HostTensor s_ref(DType::f32, {N, c.D, std::max<int64_t>(c.S, 1)}, 0, 0.f), s(DType::f32, {N, c.D, std::max<int64_t>(c.S, 1)}, 0, 0.f);
  CausalConv1dOptions opts;
  if (c.bias) opts.bias = b.view;
  if (c.S) opts.initial_state = h0.view;
  opts.activation = c.act;
  if (!c.cu.empty()) {
    opts.cu_seqlens = c.cu.data();
    opts.cu_seqlens_len = int64_t(c.cu.size());
  }
  if (c.S) opts.final_state = s_ref.view;
  causal_conv1d_reference(x.view, w.view, y_ref.view, opts);
  if (c.S) opts.final_state = s.view;
  const double tol = c.dtype == DType::f32 ? 1e-6 : 1e-2;
  testing::for_each_target([&](Target) {
    causal_conv1d(x.view, w.view, y.view, opts);
    EXPECT_LE(testing::relative_rms(y, y_ref), tol);
    if (c.S) EXPECT_EQ(testing::max_abs_diff(s, s_ref), 0.0);
  });
}

TEST(ShortConv, WidthsLengthsChannels) {
  for (int64_t W : {1, 2, 3, 4})
    for (int64_t T : {1, 2, 5, 100})
      for (int64_t D : {1, 17, 64, 200}) check({.B = 2, .T = T, .D = D, .W = W});
}

TEST(ShortConv, StatesActivationVarlen) {
  check({.B = 2, .T = 9, .D = 80, .W = 4, .S = 3, .act = ConvActivation::silu});
  check({.B = 1, .T = 2, .D = 80, .W = 4, .S = 4});  // fla's [N, D, W] cache layout, shorter than the state
  check({.B = 1, .T = 50, .D = 96, .W = 3, .S = 2, .cu = {0, 1, 1, 20, 50}, .act = ConvActivation::silu});
  check({.B = 1, .T = 30, .D = 70, .W = 4, .S = 3, .bias = false, .dtype = DType::bf16});
}

// Several token blocks (64 rows) and channel chunks (1024) per sequence, the final state written over the
// initial state that the first token block reads.
TEST(ShortConv, BlocksChunksAndAliasedState) {
  check({.B = 1, .T = 200, .D = 1500, .W = 4, .S = 3, .cu = {0, 2, 130, 200}, .act = ConvActivation::silu});
  check({.B = 2, .T = 129, .D = 2049, .W = 3, .S = 2});
  const int64_t N = 2, T = 150, D = 1100, W = 4;
  HostTensor x(DType::f32, {N, T, D}, 1), w(DType::f32, {D, W}, 2), h0(DType::f32, {N, D, W - 1}, 4);
  HostTensor y(DType::f32, {N, T, D}, 0, 0.f), y_ref(DType::f32, {N, T, D}, 0, 0.f);
  HostTensor s_ref(DType::f32, {N, D, W - 1}, 0, 0.f), state(DType::f32, {N, D, W - 1}, 0, 0.f);
  CausalConv1dOptions opts;
  opts.initial_state = h0.view;
  opts.final_state = s_ref.view;
  causal_conv1d_reference(x.view, w.view, y_ref.view, opts);
  testing::for_each_target([&](Target) {
    std::copy_n(h0.view.ptr<float>(), N * D * (W - 1), state.view.ptr<float>());
    opts.initial_state = opts.final_state = state.view;
    causal_conv1d(x.view, w.view, y.view, opts);
    EXPECT_LE(testing::relative_rms(y, y_ref), 1e-6);
    EXPECT_EQ(testing::max_abs_diff(state, s_ref), 0.0);
  });
}

TEST(ShortConv, OutputOverlappingInputIsRefused) {
  HostTensor x(DType::f32, {1, 8, 16}, 1), w(DType::f32, {16, 4}, 2);
  try {
    causal_conv1d(x.view, w.view, x.view, {});
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("y"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
}

TEST(ShortConv, TorchConvDefinition) {
  // y[t] = sum_w weight[w] x[t - 3 + w] with zero left padding, checked by hand on one channel.
  HostTensor x(DType::f32, {1, 5, 1}, 0, 0.f), w(DType::f32, {1, 4}, 0, 0.f), y(DType::f32, {1, 5, 1}, 0, 0.f);
  for (int i = 0; i < 5; ++i) x.view.ptr<float>()[i] = float(i + 1);  // 1 2 3 4 5
  for (int i = 0; i < 4; ++i) w.view.ptr<float>()[i] = float(1 << i);  // 1 2 4 8 (oldest tap first)
  causal_conv1d(x.view, w.view, y.view, {});
  const float want[5] = {8, 4 + 16, 2 + 8 + 24, 1 + 4 + 12 + 32, 2 + 6 + 16 + 40};
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y.at(i), want[i]) << i;
}

TEST(ShortConv, DecodeStepsMatchPrefill) {
  const int64_t N = 3, T = 12, D = 40, W = 4;
  HostTensor x(DType::f32, {N, T, D}, 1), w(DType::f32, {D, W}, 2), b(DType::f32, {D}, 3);
  HostTensor y_full(DType::f32, {N, T, D}, 0, 0.f), state(DType::f32, {N, D, W - 1}, 0, 0.f);
  CausalConv1dOptions opts;
  opts.bias = b.view;
  opts.activation = ConvActivation::silu;
  causal_conv1d(x.view, w.view, y_full.view, opts);
  HostTensor xt(DType::f32, {N, D}, 0, 0.f), yt(DType::f32, {N, D}, 0, 0.f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) xt.view.ptr<float>()[n * D + d] = x.at((n * T + t) * D + d);
    causal_conv1d_update(xt.view, state.view, w.view, b.view, yt.view, ConvActivation::silu);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) ASSERT_NEAR(yt.at(n * D + d), y_full.at((n * T + t) * D + d), 1e-5);
  }
}

TEST(ShortConv, BadArguments) {
  HostTensor x(DType::f32, {1, 5, 8}, 1), w(DType::f32, {7, 4}, 2), y(DType::f32, {1, 5, 8}, 0);
  EXPECT_THROW(causal_conv1d(x.view, w.view, y.view, {}), ArgumentError);
  HostTensor w2(DType::f32, {8, 4}, 2), s(DType::f32, {1, 8, 2}, 0), xi(DType::i32, {1, 5, 8}, 0, 0.f);
  CausalConv1dOptions opts;
  opts.initial_state = s.view;  // state shorter than W - 1
  EXPECT_THROW(causal_conv1d(x.view, w2.view, y.view, opts), ArgumentError);
  EXPECT_THROW(causal_conv1d(xi.view, w2.view, y.view, {}), DTypeError);
}

}  // namespace
}  // namespace attnzoo
