// gpt-oss's expert kernels (layers/cuda/gpt_oss_moe_kernel.cuh) under the CTA emulator against their CPU twins:
// the grouped bias exactly against the host's own sums (idle experts first, between and last; one busy expert;
// the router's form without offsets), the clamped SwiGLU against gpt_oss_clamped_swiglu over values well past the
// limit, in place in the gate half of one [n, 2I] row as the runner calls it. Then the whole routed half as the GPU
// runner runs it (device_moe.cc): GptOssMoe's own routing, the grouping, the gather, gate | up as a grouped GEMM,
// its bias, the SwiGLU, down, its bias and the combine, against GptOssMoe::forward over the same bf16 weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/gpt_oss_moe_kernel.cuh"
#include "layers/cuda/grouped_gemm_kernel.cuh"
#include "layers/cuda/moe_kernel.cuh"
#include "layers/cuda/moe_plan.h"
#include "layers/gpt_oss_moe.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_array.h"
#include "testing/cuda_emulation/moe_group_run.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_gpt_oss;
using cuda_emulation::DeviceMemory;
using cuda_gemm::TileKind;
using testing::HostTensor;

using Buf = cuda_emulation::DeviceArray;

void run_bias(const BiasParams& p, int64_t count) {
  // Grid capped so the grid-stride loop takes several rounds.
  cuda_emulation::launch(dim3(std::min(cuda_step::grid_for(count, kThreads), 3u)), kThreads, 0,
                         [&](unsigned char*) { add_grouped_bias(p); });
}

// Rows per expert: idle ones at the start, between and at the end, as `loads` gives them.
void check_grouped_bias(const std::vector<int32_t>& loads, int64_t N, uint64_t seed) {
  const int64_t E = int64_t(loads.size()), ldy = N + 5;
  std::vector<int32_t> offsets(1, 0);
  for (int32_t l : loads) offsets.push_back(offsets.back() + l);
  const int64_t n = offsets.back();
  SCOPED_TRACE("E " + std::to_string(E) + " rows " + std::to_string(n) + " N " + std::to_string(N));
  HostTensor y(DType::f32, {n, ldy}, seed), bias(DType::f32, {E, N}, seed + 1);
  Buf yd(size_t(n * ldy), DType::f32), bd(size_t(E * N), DType::f32), od(size_t(E + 1), DType::i32);
  std::memcpy(yd.mem.data(), y.view.data, size_t(n * ldy) * 4);
  std::memcpy(bd.mem.data(), bias.view.data, size_t(E * N) * 4);
  std::memcpy(od.mem.data(), offsets.data(), size_t(E + 1) * 4);
  TensorView yv = yd.view(DType::f32, {n, N});
  yv.strides[0] = ldy;
  const TensorView ov = od.view(DType::i32, {E + 1});
  check_grouped_bias_cuda(yv, bd.view(DType::f32, {E, N}), &ov);
  run_bias({yd.at<float>(), ldy, bd.at<const float>(), od.at<const int32_t>(), int(n), int(N), int(E)}, n * N);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = offsets[size_t(e)]; r < offsets[size_t(e) + 1]; ++r)
      for (int64_t c = 0; c < ldy; ++c) {
        const float want = y.at(r * ldy + c) + (c < N ? bias.at(e * N + c) : 0.f);  // the padding untouched
        ASSERT_EQ(yd.at<float>()[r * ldy + c], want) << "expert " << e << " row " << r << " column " << c;
      }
}

TEST(EmulatedGptOssMoe, GroupedBiasAddsEachRowsExpertsBias) {
  check_grouped_bias({0, 3, 0, 0, 5, 1, 0}, 40, 1);
  check_grouped_bias({7}, 33, 2);
  check_grouped_bias({0, 0, 0, 12, 0, 0}, 64, 3);
  std::vector<int32_t> many(300);
  std::mt19937 rng(4);
  for (int32_t& l : many) l = int32_t(rng() % 3);
  check_grouped_bias(many, 8, 5);
}

TEST(EmulatedGptOssMoe, RouterBiasWithoutOffsetsGoesOnEveryRow) {
  const int64_t T = 9, E = 32;
  HostTensor y(DType::f32, {T, E}, 6), bias(DType::f32, {1, E}, 7);
  Buf yd(size_t(T * E), DType::f32), bd(size_t(E), DType::f32);
  std::memcpy(yd.mem.data(), y.view.data, size_t(T * E) * 4);
  std::memcpy(bd.mem.data(), bias.view.data, size_t(E) * 4);
  check_grouped_bias_cuda(yd.view(DType::f32, {T, E}), bd.view(DType::f32, {1, E}), nullptr);
  run_bias({yd.at<float>(), E, bd.at<const float>(), nullptr, int(T), int(E), 1}, T * E);
  for (int64_t q = 0; q < T * E; ++q) ASSERT_EQ(yd.at<float>()[q], y.at(q) + bias.at(q % E)) << q;
}

TEST(EmulatedGptOssMoe, ChecksRefuseByName) {
  Buf yd(64, DType::f32), bd(64, DType::f32), od(8, DType::i32);
  const TensorView y = yd.view(DType::f32, {4, 16}), offsets = od.view(DType::i32, {3});
  auto refusal = [](auto&& call) {
    try {
      call();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal([&] { check_grouped_bias_cuda(y, bd.view(DType::f32, {2, 16}), nullptr); }).find("bias"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_grouped_bias_cuda(y, bd.view(DType::f32, {3, 16}), &offsets); }).find("offsets"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_grouped_bias_cuda(y, bd.view(DType::f32, {2, 8}), &offsets); }).find("bias"),
            std::string::npos);
  EXPECT_EQ(refusal([&] { check_grouped_bias_cuda(y, bd.view(DType::f32, {2, 16}), &offsets); }), "");
  EXPECT_NE(refusal([&] { check_gpt_oss_swiglu_cuda(y, y, 1.f, 0.f, y); }).find("limit"), std::string::npos);
  EXPECT_NE(refusal([&] { check_gpt_oss_swiglu_cuda(y, yd.view(DType::f32, {2, 16}), 1.f, 7.f, y); }).find("up"),
            std::string::npos);
}

TEST(EmulatedGptOssMoe, ClampedSwigluMatchesTheCpu) {
  for (auto [n, I, limit, alpha] : std::vector<std::tuple<int64_t, int64_t, float, float>>{
           {1, 64, 7.f, 1.702f}, {37, 90, 7.f, 1.702f}, {5, 33, 0.3f, 1.2f}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " I " + std::to_string(I) + " limit " + std::to_string(limit));
    HostTensor gu(DType::f32, {n, 2 * I}, uint64_t(n + I), 6.f);  // well past the limit on both sides
    Buf d(size_t(n * 2 * I), DType::f32);
    std::memcpy(d.mem.data(), gu.view.data, size_t(n * 2 * I) * 4);
    TensorView gate = d.view(DType::f32, {n, I}), up = gate;
    up.data = d.at<float>() + I;
    gate.strides[0] = up.strides[0] = 2 * I;
    check_gpt_oss_swiglu_cuda(gate, up, alpha, limit, gate);
    const SwigluParams p{d.at<const float>(), d.at<const float>() + I, d.at<float>(), 2 * I, 2 * I, 2 * I,
                         int(n), int(I), alpha, limit};
    cuda_emulation::launch(dim3(std::min(cuda_step::grid_for(n * I, kThreads), 2u)), kThreads, 0,
                           [&](unsigned char*) { clamped_swiglu(p); });
    std::vector<float> want(static_cast<size_t>(I));
    for (int64_t r = 0; r < n; ++r) {
      const float* row = static_cast<const float*>(gu.view.data) + r * 2 * I;
      gpt_oss_clamped_swiglu(row, row + I, alpha, limit, want.data(), I);
      for (int64_t i = 0; i < I; ++i) {
        ASSERT_NEAR(d.at<float>()[r * 2 * I + i], want[size_t(i)], 2e-6f * std::abs(want[size_t(i)]) + 1e-30f)
            << "row " << r << " feature " << i << " gate " << row[i] << " up " << row[I + i];
        ASSERT_EQ(d.at<float>()[r * 2 * I + I + i], row[I + i]) << "up half written at " << r << ", " << i;
      }
    }
  }
}

// The small tile (the grouping's tile_rows are its BM), as moe_tile picks for a few rows per expert.
void grouped_gemm(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, const TensorView& y) {
  using namespace cuda_moe;
  using Tile = cuda_gemm::SmallTile;
  check_grouped_gemm_cuda(x, w, g, y);
  const GroupedGemmLaunch l = plan_grouped_gemm(x, w, g, TileKind::small, y);
  cuda_emulation::launch(dim3(l.grid_m, l.grid_n), Tile::kThreads, Tile::kSmemBytes, [&](unsigned char* smem) {
    grouped_gemm_block<Tile, __nv_bfloat16>(l.params, smem);
  });
}

// The routed half as device_moe.cc runs it for a GptOssMoe, against GptOssMoe::forward.
void check_experts(int64_t T, int64_t E, int64_t k, int64_t H, int64_t I, float limit, uint64_t seed) {
  using namespace cuda_moe;
  SCOPED_TRACE("T " + std::to_string(T) + " E " + std::to_string(E) + " k " + std::to_string(k) + " H " +
               std::to_string(H) + " I " + std::to_string(I) + " limit " + std::to_string(limit));
  const int64_t n = T * k, F = 2 * I;
  // bf16 normed rows (the runner's), bf16 expert weights, f32 biases and router.
  HostTensor x(DType::bf16, {T, H}, seed), residual(DType::f32, {T, H}, seed + 1);
  HostTensor router_w(DType::f32, {E, H}, seed + 2, 0.3f), router_b(DType::f32, {E}, seed + 3);
  std::vector<HostTensor> wg, wu, wd, bg, bu, bdn;
  std::vector<GptOssExpert> experts;
  for (int64_t e = 0; e < E; ++e) {
    const uint64_t s = seed + 10 * uint64_t(e + 1);
    wg.emplace_back(DType::bf16, std::vector<int64_t>{I, H}, s, 0.3f);
    wu.emplace_back(DType::bf16, std::vector<int64_t>{I, H}, s + 1, 0.3f);
    wd.emplace_back(DType::bf16, std::vector<int64_t>{H, I}, s + 2, 0.3f);
    bg.emplace_back(DType::f32, std::vector<int64_t>{I}, s + 3, 0.5f);
    bu.emplace_back(DType::f32, std::vector<int64_t>{I}, s + 4, 0.5f);
    bdn.emplace_back(DType::f32, std::vector<int64_t>{H}, s + 5, 0.5f);
    experts.push_back({Linear::from_weights(wg.back().view, bg.back().view, "g"),
                       Linear::from_weights(wu.back().view, bu.back().view, "u"),
                       Linear::from_weights(wd.back().view, bdn.back().view, "d")});
  }
  GptOssMoeConfig mc;
  mc.top_k = k;
  mc.limit = limit;
  const GptOssMoe moe(mc, Linear::from_weights(router_w.view, router_b.view, "router"), std::move(experts), nullptr,
                      "mlp");
  std::vector<float> xs(size_t(T * H));
  for (int64_t q = 0; q < T * H; ++q) xs[size_t(q)] = x.at(q);
  MoeRouting routing;
  moe.route(xs.data(), T, routing);

  Buf ids(size_t(n), DType::i32), wts(size_t(n), DType::f32), offsets(size_t(E + 1), DType::i32),
      tiles(size_t(E + 1), DType::i32), source(size_t(n), DType::i32), dest(size_t(n), DType::i32);
  Buf xd(size_t(T * H), DType::bf16), gathered(size_t(n * H), DType::bf16), w_gu(size_t(E * F * H), DType::bf16),
      b_gu(size_t(E * F), DType::f32), gu(size_t(n * F), DType::f32), w_down(size_t(E * H * I), DType::bf16),
      b_down(size_t(E * H), DType::f32), out(size_t(n * H), DType::f32), xres(size_t(T * H), DType::f32);
  std::memcpy(ids.mem.data(), routing.experts.data(), size_t(n) * 4);
  std::memcpy(wts.mem.data(), routing.weights.data(), size_t(n) * 4);
  std::memcpy(xd.mem.data(), x.view.data, size_t(T * H) * 2);
  std::memcpy(xres.mem.data(), residual.view.data, size_t(T * H) * 4);
  for (int64_t e = 0; e < E; ++e) {  // gate | up stacked per expert as [E, 2I, H], their biases as [E, 2I]
    const size_t m = size_t(I * H) * 2;
    std::memcpy(w_gu.mem.data() + size_t(e) * 2 * m, wg[size_t(e)].view.data, m);
    std::memcpy(w_gu.mem.data() + size_t(e) * 2 * m + m, wu[size_t(e)].view.data, m);
    std::memcpy(w_down.mem.data() + size_t(e) * m, wd[size_t(e)].view.data, m);
    std::memcpy(b_gu.at<float>() + e * F, bg[size_t(e)].view.data, size_t(I) * 4);
    std::memcpy(b_gu.at<float>() + e * F + I, bu[size_t(e)].view.data, size_t(I) * 4);
    std::memcpy(b_down.at<float>() + e * H, bdn[size_t(e)].view.data, size_t(H) * 4);
  }
  const MoeGroupingCuda g{offsets.view(DType::i32, {E + 1}), tiles.view(DType::i32, {E + 1}),
                          source.view(DType::i32, {n}), dest.view(DType::i32, {n}), {}};
  cuda_emulation::seed_schedule(seed);
  const GroupParams gp{ids.at<const int32_t>(), int(n), int(E), int(cuda_gemm::SmallTile::BM),
                       offsets.at<int32_t>(), tiles.at<int32_t>(), source.at<int32_t>(), dest.at<int32_t>(),
                       nullptr, 1, int(n)};
  cuda_emulation::run_grouping(gp);
  const GatherParams gather{xd.mem.data(), H, source.at<const int32_t>(), gathered.mem.data(), int(n), int(H), int(k)};
  cuda_emulation::launch(dim3(cuda_step::grid_for(n * H, 256)), 256, 0,
                         [&](unsigned char*) { gather_rows<__nv_bfloat16, __nv_bfloat16>(gather); });

  grouped_gemm(gathered.view(DType::bf16, {n, H}), w_gu.view(DType::bf16, {E, F, H}), g,
                                     gu.view(DType::f32, {n, F}));
  run_bias({gu.at<float>(), F, b_gu.at<const float>(), offsets.at<const int32_t>(), int(n), int(F), int(E)}, n * F);
  const SwigluParams sp{gu.at<const float>(), gu.at<const float>() + I, gu.at<float>(), F, F, F, int(n), int(I),
                        mc.alpha, mc.limit};
  cuda_emulation::launch(dim3(cuda_step::grid_for(n * I, kThreads)), kThreads, 0, [&](unsigned char*) { clamped_swiglu(sp); });
  TensorView act = gu.view(DType::f32, {n, I});
  act.strides[0] = F;
  grouped_gemm(act, w_down.view(DType::bf16, {E, H, I}), g, out.view(DType::f32, {n, H}));
  run_bias({out.at<float>(), H, b_down.at<const float>(), offsets.at<const int32_t>(), int(n), int(H), int(E)},
           n * H);
  const CombineParams cp{out.at<const float>(), dest.at<const int32_t>(), wts.at<const float>(), nullptr, 0, nullptr,
                         0, xres.at<float>(), H, int(T), int(H), int(k)};
  cuda_emulation::launch(dim3(cuda_step::grid_for(T * H, 256)), 256, 0, [&](unsigned char*) { combine_slots(cp); });

  std::vector<float> want(size_t(T * H));
  moe.forward(xs.data(), T, want.data());
  float scale = 0.f, worst = 0.f;
  int64_t worst_at = 0;
  for (int64_t q = 0; q < T * H; ++q) {
    scale = std::max(scale, std::abs(want[size_t(q)]));
    const float err = std::abs(xres.at<float>()[q] - residual.at(q) - want[size_t(q)]);
    if (!(err <= worst)) worst = err, worst_at = q;
  }
  // The intermediate goes into down as bf16 (the CPU keeps f32): a wrong bias, expert or clamp is off by far more.
  EXPECT_LE(worst, 0.01f * scale + 1e-4f) << "token " << worst_at / H << " column " << worst_at % H << ", scale "
                                          << scale;
}

TEST(EmulatedGptOssMoe, RoutedExpertsMatchGptOssMoe) {
  check_experts(1, 8, 4, 64, 48, 7.f, 100);
  check_experts(23, 8, 2, 64, 40, 7.f, 200);
  check_experts(40, 4, 3, 48, 32, 0.3f, 300);  // a limit that clamps often, as test_model_gpt_oss.py's
}

}  // namespace
}  // namespace attnzoo
