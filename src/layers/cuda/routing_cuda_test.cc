// The CUDA top-k routing against route_softmax_top_k (moe.h) and route_top_k_softmax (gpt_oss_moe.h): expert ids
// exactly, weights to the last f32 bit or two; numbers of experts in each register-tile size, strided logits,
// bf16 logits, and logits quantized to a few levels so ties (to the lower index) decide most slots. Refusals are
// host-only and run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "layers/gpt_oss_moe.h"
#include "layers/moe.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(RouteTopKCuda, RefusesNamingTheArgument) {
  const TensorView logits = fake_cuda_view(DType::f32, {5, 64});
  const TensorView ids = fake_cuda_view(DType::i32, {5, 8}), w = fake_cuda_view(DType::f32, {5, 8});
  RouteCudaOptions opts;
  opts.top_k = 8;
  EXPECT_NO_THROW(check_route_top_k_cuda(logits, ids, w, opts));

  TensorView host = logits;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { route_top_k_cuda(host, ids, w, opts); }, "logits: lives on cpu");
  expect_error<ArgumentError>(
      [&] {
        check_route_top_k_cuda(fake_cuda_view(DType::f32, {5, 1025}), ids, w, opts);
      },
      "logits: CUDA routing takes 1 to 1024 experts");
  expect_error<ArgumentError>([&] { check_route_top_k_cuda(fake_cuda_view(DType::f32, {320}), ids, w, opts); },
                              "logits: expected [tokens, experts]");
  RouteCudaOptions too_many = opts;
  too_many.top_k = 65;
  expect_error<ArgumentError>([&] { check_route_top_k_cuda(logits, ids, w, too_many); }, "top_k: must be in [1, 64]");
  too_many.top_k = 0;
  expect_error<ArgumentError>([&] { check_route_top_k_cuda(logits, ids, w, too_many); }, "top_k: must be in");
  too_many.top_k = 33;
  expect_error<ArgumentError>([&] { check_route_top_k_cuda(logits, ids, w, too_many); },
                              "top_k: CUDA routing chooses at most 32");
  expect_error<DTypeError>([&] { check_route_top_k_cuda(logits, fake_cuda_view(DType::i64, {5, 8}), w, opts); },
                           "experts: must be int32");
  expect_error<ArgumentError>([&] { check_route_top_k_cuda(logits, ids, fake_cuda_view(DType::f32, {5, 4}), opts); },
                              "weights: expected a contiguous [5, 8]");
  expect_error<ArgumentError>(
      [&] { check_route_top_k_cuda(logits, ids, fake_cuda_view(DType::f32, {5, 8}, Device::cuda(1)), opts); },
      "weights: lives on cuda:1");
  RouteCudaOptions gpt_oss = opts;
  gpt_oss.order = RouteOrder::top_k_then_softmax;
  gpt_oss.normalize = true;
  expect_error<ArgumentError>([&] { check_route_top_k_cuda(logits, ids, w, gpt_oss); }, "normalize: ");
}

#if ATTNZOO_WITH_CUDA

class RouteTopKCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

struct RouteCase {
  int64_t T, E, top_k;
  RouteOrder order = RouteOrder::softmax_then_top_k;
  bool normalize = false;
  DType dtype = DType::f32;
  bool ties = false;       // logits rounded to quarters: many exactly equal
  int64_t row_pad = 0;
};

void check_route(const RouteCase& c) {
  SCOPED_TRACE("T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " top_k " + std::to_string(c.top_k) +
               (c.order == RouteOrder::top_k_then_softmax ? " top_k_then_softmax" : "") +
               (c.normalize ? " normalized " : " ") + dtype_name(c.dtype) + (c.ties ? " ties" : "") + " pad " +
               std::to_string(c.row_pad));
  DeviceOperand logits(c.dtype, {c.T, c.E}, 5, {c.E + c.row_pad, 1}, 2.f);
  if (c.ties) {
    logits.for_each([&](int64_t o) { logits.set(o, std::round(logits.at(o) * 4.f) / 16.f); });
    for (int64_t e = 0; e < c.E; ++e) logits.set(e * 1, 0.5f);  // token 0: every expert equal
    logits.upload();
  }
  DeviceOperand ids(DType::i32, {c.T, c.top_k}, 0), weights(DType::f32, {c.T, c.top_k}, 0);
  RouteCudaOptions opts{c.top_k, c.order, c.normalize};
  route_top_k_cuda(logits.device_view(), ids.device_view(), weights.device_view(), opts);
  ids.download();
  weights.download();
  synchronize(current_stream());

  std::vector<float> dense(size_t(c.T * c.E));  // the CPU twins take f32 [T, E] contiguous
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t e = 0; e < c.E; ++e) dense[size_t(t * c.E + e)] = logits.at(t * (c.E + c.row_pad) + e);
  MoeRouting want;
  if (c.order == RouteOrder::softmax_then_top_k) {
    route_softmax_top_k(dense.data(), c.T, c.E, c.top_k, c.normalize, want);
  } else {
    route_top_k_softmax(dense.data(), c.T, c.E, c.top_k, want);
  }
  for (int64_t i = 0; i < c.T * c.top_k; ++i) {
    ASSERT_EQ(ids.view.ptr<int32_t>()[i], want.experts[size_t(i)]) << "token " << i / c.top_k << " slot " << i % c.top_k;
    // The same double sums and divisions; only the warp's summation order (exact for <= 32 chosen terms in
    // double, nearly so for E) differs: a few f32 ulp at most.
    ASSERT_NEAR(weights.view.ptr<float>()[i], want.weights[size_t(i)], 4e-7 * want.weights[size_t(i)] + 1e-12)
        << "token " << i / c.top_k << " slot " << i % c.top_k;
  }
}

TEST_F(RouteTopKCudaGpu, MatchesTheCpuRouting) {
  for (bool ties : {false, true}) {
    check_route({1, 8, 2, RouteOrder::softmax_then_top_k, false, DType::f32, ties});          // Mixtral, decode
    check_route({77, 60, 4, RouteOrder::softmax_then_top_k, true, DType::f32, ties, 3});      // Qwen2-MoE, strided
    check_route({33, 128, 8, RouteOrder::softmax_then_top_k, true, DType::bf16, ties});       // Qwen3, bf16 logits
    check_route({20, 256, 8, RouteOrder::softmax_then_top_k, false, DType::f16, ties, 1});    // 8 per lane
    check_route({9, 1000, 32, RouteOrder::softmax_then_top_k, true, DType::f32, ties});       // 32 per lane, k 32
    check_route({40, 32, 4, RouteOrder::top_k_then_softmax, false, DType::f32, ties});        // gpt-oss 20b
    check_route({6, 128, 4, RouteOrder::top_k_then_softmax, false, DType::bf16, ties, 5});    // gpt-oss 120b
    check_route({3, 5, 5, RouteOrder::softmax_then_top_k, true, DType::f32, ties});           // top_k = E
  }
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
