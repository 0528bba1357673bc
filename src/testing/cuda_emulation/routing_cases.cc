// The CUDA top-k routing (layers/cuda/routing_kernel.cuh) under the CTA emulator against its CPU twins,
// route_softmax_top_k (moe.h) and route_top_k_softmax (gpt_oss_moe.h): expert ids exactly, weights within the GPU
// test's few f32 ulp. Every register tile (4, 8 and 32 scores per lane), top_k 1 to 8 and E, normalized or not,
// both orders, and forced ties: rows of equal logits, duplicated maxima, logits on a coarse grid. The grid is
// capped at two blocks so that the token loop takes several rounds; the outputs start as 0xFF bytes, with spare
// bytes after them that must stay so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "layers/cuda/routing_kernel.cuh"
#include "layers/gpt_oss_moe.h"
#include "layers/moe.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::DeviceMemory;
using cuda_emulation::StridedOperand;

// routing.cu's register tile for E experts.
template <class T, RouteOrder kOrder>
void launch_route(const RouteParams<T>& p) {
  const unsigned grid = std::min(grid_for(p.tokens, kWarpsPerBlock), 2u);
  cuda_emulation::launch(dim3(grid), kRouteThreads, 0, [&](unsigned char*) {
    if (p.experts_per_token <= 128) route_tokens<T, 4, kOrder>(p);
    else if (p.experts_per_token <= 256) route_tokens<T, 8, kOrder>(p);
    else route_tokens<T, 32, kOrder>(p);
  });
}

enum class Ties { none, grid, equal_rows, duplicate_max };

struct RouteCase {
  int64_t T, E, top_k;
  RouteOrder order = RouteOrder::softmax_then_top_k;
  bool normalize = false;
  DType dtype = DType::f32;
  Ties ties = Ties::none;
  int64_t row_pad = 0;
};

void check_route(const RouteCase& c) {
  SCOPED_TRACE("T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " top_k " + std::to_string(c.top_k) +
               (c.order == RouteOrder::top_k_then_softmax ? " top_k_then_softmax" : "") +
               (c.normalize ? " normalized " : " ") + dtype_name(c.dtype) + " ties " +
               std::to_string(int(c.ties)) + " pad " + std::to_string(c.row_pad));
  const int64_t stride = c.E + c.row_pad;
  StridedOperand logits(c.dtype, {c.T, c.E}, 5 + uint64_t(c.E), {stride, 1}, 2.f);
  switch (c.ties) {
    case Ties::none: break;
    case Ties::grid:  // quarters of a narrow range: most slots are decided by the lower index
      logits.for_each([&](int64_t o) { logits.set(o, std::round(logits.at(o) * 4.f) / 16.f); });
      break;
    case Ties::equal_rows:  // every expert of every other token equal
      for (int64_t t = 0; t < c.T; t += 2)
        for (int64_t e = 0; e < c.E; ++e) logits.set(t * stride + e, 0.5f);
      break;
    case Ties::duplicate_max:  // the row's maximum copied to three more experts, one in another lane and tile
      for (int64_t t = 0; t < c.T; ++t) {
        int64_t best = 0;
        for (int64_t e = 1; e < c.E; ++e)
          if (logits.at(t * stride + e) > logits.at(t * stride + best)) best = e;
        const float m = logits.at(t * stride + best);
        for (int64_t e : {(best + 33) % c.E, (best + c.E - 1) % c.E, (best * 7 + 3) % c.E}) logits.set(t * stride + e, m);
      }
      break;
  }
  logits.upload();

  // Outputs start as 0xFF; 16 spare bytes after each must stay so.
  const size_t n = size_t(c.T * c.top_k);
  DeviceMemory ids((n + 4) * sizeof(int32_t)), weights((n + 4) * sizeof(float));
  std::memset(ids.data(), 0xff, ids.size());
  std::memset(weights.data(), 0xff, weights.size());
  with_float_type(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    const RouteParams<T> p{logits.device_ptr<const T>(), stride, reinterpret_cast<int32_t*>(ids.data()),
                           reinterpret_cast<float*>(weights.data()), c.T, int(c.E), int(c.top_k), c.normalize};
    c.order == RouteOrder::softmax_then_top_k ? launch_route<T, RouteOrder::softmax_then_top_k>(p)
                                              : launch_route<T, RouteOrder::top_k_then_softmax>(p);
  });

  std::vector<float> dense(size_t(c.T * c.E));  // the CPU twins take f32 [T, E] contiguous
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t e = 0; e < c.E; ++e) dense[size_t(t * c.E + e)] = logits.at(t * stride + e);
  MoeRouting want;
  if (c.order == RouteOrder::softmax_then_top_k) {
    route_softmax_top_k(dense.data(), c.T, c.E, c.top_k, c.normalize, want);
  } else {
    route_top_k_softmax(dense.data(), c.T, c.E, c.top_k, want);
  }
  const auto* got_ids = reinterpret_cast<const int32_t*>(ids.data());
  const auto* got_w = reinterpret_cast<const float*>(weights.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_ids[i], want.experts[i]) << "token " << i / size_t(c.top_k) << " slot " << i % size_t(c.top_k);
    // routing_cuda_test.cc's bound: the same double sums, in the warp's order.
    ASSERT_NEAR(got_w[i], want.weights[i], 4e-7 * want.weights[i] + 1e-12)
        << "token " << i / size_t(c.top_k) << " slot " << i % size_t(c.top_k);
  }
  for (size_t b = n * 4; b < ids.size(); ++b) ASSERT_EQ(ids.data()[b], 0xff) << "byte " << b << " after the ids";
  for (size_t b = n * 4; b < weights.size(); ++b) ASSERT_EQ(weights.data()[b], 0xff) << "byte " << b << " after the weights";
}

TEST(EmulatedRouting, MatchesTheCpuRouting) {
  for (Ties ties : {Ties::none, Ties::grid, Ties::equal_rows, Ties::duplicate_max}) {
    check_route({1, 8, 2, RouteOrder::softmax_then_top_k, false, DType::f32, ties});         // Mixtral, decode
    check_route({37, 60, 4, RouteOrder::softmax_then_top_k, true, DType::f32, ties, 3});     // Qwen2-MoE, strided
    check_route({21, 128, 8, RouteOrder::softmax_then_top_k, true, DType::bf16, ties});      // Qwen3, bf16
    check_route({19, 256, 8, RouteOrder::softmax_then_top_k, false, DType::f16, ties, 1});   // 8 per lane
    check_route({5, 1000, 6, RouteOrder::softmax_then_top_k, true, DType::f32, ties});       // 32 per lane
    check_route({35, 32, 4, RouteOrder::top_k_then_softmax, false, DType::f32, ties});       // gpt-oss 20b
    check_route({6, 128, 4, RouteOrder::top_k_then_softmax, false, DType::bf16, ties, 5});   // gpt-oss 120b
    check_route({4, 1000, 8, RouteOrder::top_k_then_softmax, false, DType::f16, ties});
    check_route({3, 5, 5, RouteOrder::softmax_then_top_k, true, DType::f32, ties});          // top_k = E
  }
}

// Every top_k from 1 to 8 in both orders, normalized and not.
TEST(EmulatedRouting, MatchesEveryTopK) {
  for (int64_t k = 1; k <= 8; ++k) {
    check_route({9, 60, k, RouteOrder::softmax_then_top_k, false, DType::f32, Ties::grid});
    check_route({9, 256, k, RouteOrder::softmax_then_top_k, true, DType::bf16, Ties::duplicate_max, 2});
    check_route({9, 128, k, RouteOrder::top_k_then_softmax, false, DType::f32, Ties::grid});
  }
}

}  // namespace
}  // namespace attnzoo
