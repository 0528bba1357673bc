// The MoE dispatch (layers/cuda/moe_kernel.cuh, grouped_gemm_kernel.cuh) under the CTA emulator against the CPU
// layer it stands in for, run_routed_experts (layers/moe.h) over GatedMlp experts of the same bf16 weights:
// grouping (exact: offsets, tile prefixes and the stable order by expert, token, slot), gather, the grouped GEMMs
// gate|up and down (the activation over the halves on the host, as its own kernel is elementwise_cuda's), and the
// combine into the residual (exact against the same float sums in the CPU's order), with and without a shared
// expert and its sigmoid gate. Ragged loads with idle experts, T = 1 to 700, top_k 1 / 2 / 8, both tiles, K
// on and off the 16-byte staging; Nemotron-H's ungated relu² experts (up, the in-place activation kernel, down).
// The normed rows h f32, or bf16 as the GPU runner hands them (the gather checked exactly against h's rows either
// way). And the f32 router's dot products against Linear::forward over f32 and bf16 rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "layers/activations.h"
#include "layers/cuda/grouped_gemm_kernel.cuh"
#include "layers/cuda/moe_kernel.cuh"
#include "layers/cuda/moe_plan.h"
#include "layers/moe.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_array.h"
#include "testing/cuda_emulation/moe_group_run.h"
#include "testing/random_routing.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using namespace cuda_moe;
using cuda_emulation::DeviceMemory;
using cuda_gemm::TileKind;
using testing::HostTensor;

struct Case {
  int64_t T, E, k, H, I;
  bool shared = false, gate = false;
  TileKind tile = TileKind::small;
  bool plain = false;  // PlainMlp experts (Nemotron-H): up, relu² in place, down
  DType h = DType::f32;  // the normed rows' dtype (bf16: the GPU runner's)
  std::string label() const {
    return "T=" + std::to_string(T) + " E=" + std::to_string(E) + " k=" + std::to_string(k) + " H=" +
           std::to_string(H) + " I=" + std::to_string(I) + (shared ? " shared" : "") + (gate ? " gated" : "") +
           (tile == TileKind::large ? " large" : " small") + (plain ? " plain" : "") + " h " + dtype_name(h);
  }
};

using Buf = cuda_emulation::DeviceArray;

// Each token's k distinct experts drawn from a skewed load: expert e with weight (e % 4 + 1)^2, every fifth expert
// (e % 5 == 3) never chosen while k others remain, so some experts stay idle.
MoeRouting random_routing(const Case& c, std::mt19937_64& rng) {
  std::vector<double> load(size_t(c.E));
  const bool idle = c.E - (c.E + 1) / 5 >= c.k;
  for (int64_t e = 0; e < c.E; ++e) load[size_t(e)] = idle && e % 5 == 3 ? 0.0 : double((e % 4 + 1) * (e % 4 + 1));
  return testing::draw_routing(c.T, c.k, load, rng);
}

template <class Tile>
void run_grouped(const GroupedGemmLaunch& l) {
  cuda_emulation::launch(dim3(l.grid_m, l.grid_n), Tile::kThreads, Tile::kSmemBytes, [&](unsigned char* smem) {
    grouped_gemm_block<Tile, __nv_bfloat16>(l.params, smem);
  });
}

void grouped_gemm(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, TileKind tile,
                  const TensorView& y) {
  check_grouped_gemm_cuda(x, w, g, y);
  const GroupedGemmLaunch l = plan_grouped_gemm(x, w, g, tile, y);
  if (tile == TileKind::large) run_grouped<cuda_gemm::LargeTile>(l);
  else run_grouped<cuda_gemm::SmallTile>(l);
}

void check(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.label());
  const int64_t T = c.T, E = c.E, k = c.k, H = c.H, I = c.I, n = T * k, F = c.plain ? I : 2 * I;
  std::mt19937_64 rng(seed);
  const MoeRouting routing = random_routing(c, rng);
  HostTensor x(c.h, {T, H}, seed + 1), residual(DType::f32, {T, H}, seed + 2);
  std::vector<float> xs(size_t(T * H));  // h as the CPU layer reads it
  for (int64_t q = 0; q < T * H; ++q) xs[size_t(q)] = x.at(q);
  HostTensor shared(DType::f32, {T, H}, seed + 3), gate(DType::f32, {T, 1}, seed + 4);
  std::vector<HostTensor> wg, wu, wd;
  for (int64_t e = 0; e < E; ++e) {
    wg.emplace_back(DType::bf16, std::vector<int64_t>{I, H}, seed + 100 + uint64_t(e), 0.3f);
    wu.emplace_back(DType::bf16, std::vector<int64_t>{I, H}, seed + 300 + uint64_t(e), 0.3f);
    wd.emplace_back(DType::bf16, std::vector<int64_t>{H, I}, seed + 500 + uint64_t(e), 0.3f);
  }

  // The device operands: gate | up stacked per expert as [E, 2I, H], down as [E, H, I].
  Buf ids(size_t(n), DType::i32), offsets(size_t(E + 1), DType::i32), tiles(size_t(E + 1), DType::i32),
      source(size_t(n), DType::i32), dest(size_t(n), DType::i32);
  Buf xd(size_t(T * H), c.h), gathered(size_t(n * H), DType::bf16), w_gu(size_t(E * F * H), DType::bf16),
      gu(size_t(n * F), DType::f32), w_down(size_t(E * H * I), DType::bf16), out(size_t(n * H), DType::f32),
      xres(size_t(T * H), DType::f32), sh(size_t(T * H), DType::f32), shg(size_t(T), DType::f32),
      wts(size_t(n), DType::f32);
  std::memcpy(ids.mem.data(), routing.experts.data(), size_t(n) * 4);
  std::memcpy(wts.mem.data(), routing.weights.data(), size_t(n) * 4);
  std::memcpy(xd.mem.data(), x.view.data, size_t(T * H) * dtype_size(c.h));
  std::memcpy(xres.mem.data(), residual.view.data, size_t(T * H) * 4);
  std::memcpy(sh.mem.data(), shared.view.data, size_t(T * H) * 4);
  std::memcpy(shg.mem.data(), gate.view.data, size_t(T) * 4);
  for (int64_t e = 0; e < E; ++e) {
    const size_t m = size_t(I * H) * 2;
    if (c.plain) {
      std::memcpy(w_gu.mem.data() + size_t(e) * m, wu[size_t(e)].view.data, m);
    } else {
      std::memcpy(w_gu.mem.data() + size_t(e) * 2 * m, wg[size_t(e)].view.data, m);
      std::memcpy(w_gu.mem.data() + size_t(e) * 2 * m + m, wu[size_t(e)].view.data, m);
    }
    std::memcpy(w_down.mem.data() + size_t(e) * m, wd[size_t(e)].view.data, m);
  }
  // The multi-CTA grouping's scratch, for the checks (run_grouping brings its own, poisoned).
  const int64_t scratch = moe_group_scratch(n, E);
  Buf counts(size_t(scratch), DType::i32);
  const MoeGroupingCuda g{offsets.view(DType::i32, {E + 1}), tiles.view(DType::i32, {E + 1}),
                          source.view(DType::i32, {n}), dest.view(DType::i32, {n}),
                          scratch > 0 ? counts.view(DType::i32, {scratch}) : TensorView{}};
  const int64_t tile_rows = moe_tile_rows(c.tile);
  cuda_emulation::seed_schedule(seed);

  // Grouping, exactly: a stable sort of the entries by expert.
  check_moe_group_cuda(ids.view(DType::i32, {T, k}), E, tile_rows, g);
  const GroupParams gp{ids.at<const int32_t>(), int(n), int(E), int(tile_rows),
                       offsets.at<int32_t>(), tiles.at<int32_t>(), source.at<int32_t>(), dest.at<int32_t>(),
                       nullptr, 1, int(n)};
  cuda_emulation::run_grouping(gp);
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return routing.experts[size_t(a)] < routing.experts[size_t(b)]; });
  for (int64_t r = 0; r < n; ++r) {
    ASSERT_EQ(source.at<int32_t>()[r], order[size_t(r)]) << "grouped row " << r;
    ASSERT_EQ(dest.at<int32_t>()[order[size_t(r)]], r) << "entry " << order[size_t(r)];
  }
  int32_t row = 0, tile = 0;
  for (int64_t e = 0; e <= E; ++e) {
    ASSERT_EQ(offsets.at<int32_t>()[e], row) << "offsets[" << e << "]";
    ASSERT_EQ(tiles.at<int32_t>()[e], tile) << "tiles[" << e << "]";
    if (e == E) break;
    const int32_t count = int32_t(std::count(routing.experts.begin(), routing.experts.end(), int32_t(e)));
    row += count;
    tile += int32_t((count + tile_rows - 1) / tile_rows);
  }

  // Gather (grid capped so the grid-stride loop takes several rounds).
  const TensorView xv = xd.view(c.h, {T, H}), gv = gathered.view(DType::bf16, {n, H});
  check_moe_gather_cuda(xv, g.source, k, gv);
  const GatherParams gather{xd.mem.data(), H, source.at<const int32_t>(), gathered.mem.data(), int(n), int(H),
                            int(k)};
  cuda_emulation::launch(dim3(std::min(cuda_step::grid_for(n * H, 256), 3u)), 256, 0, [&](unsigned char*) {
    if (c.h == DType::bf16) gather_rows<__nv_bfloat16, __nv_bfloat16>(gather);
    else gather_rows<float, __nv_bfloat16>(gather);
  });
  // Each gathered row is its token's h rounded to bf16 (h itself when bf16).
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < H; ++i) {
      uint16_t want = 0;
      store_from_f32(&want, DType::bf16, 0, xs[size_t(order[size_t(r)] / k * H + i)]);
      ASSERT_EQ(gathered.at<uint16_t>()[r * H + i], want) << "gathered row " << r << " column " << i;
    }

  // gate | up, the activation over the halves into the gate half, down; or up, relu² in place by the device
  // kernel, down.
  grouped_gemm(gv, w_gu.view(DType::bf16, {E, F, H}), g, c.tile, gu.view(DType::f32, {n, F}));
  TensorView act = gu.view(DType::f32, {n, I});
  if (c.plain) {
    check_activation_inplace_cuda(act);
    const ActivationParams ap{gu.at<float>(), n * I};
    cuda_emulation::launch(dim3(std::min(cuda_step::grid_for(n * I, 256), 3u)), 256, 0,
                           [&](unsigned char*) { activate_in_place<Activation::relu2>(ap); });
  } else {
    for (int64_t r = 0; r < n; ++r) {
      float* at = gu.at<float>() + r * 2 * I;
      gated_activation(Activation::silu, at, at + I, at, I);
    }
    act.strides[0] = 2 * I;
  }
  grouped_gemm(act, w_down.view(DType::bf16, {E, H, I}), g, c.tile, out.view(DType::f32, {n, H}));

  // Combine into the residual.
  const TensorView shv = sh.view(DType::f32, {T, H}), shgv = shg.view(DType::f32, {T, 1});
  check_moe_combine_cuda(out.view(DType::f32, {n, H}), g.dest, wts.view(DType::f32, {T, k}), c.shared ? &shv : nullptr,
                         c.gate ? &shgv : nullptr, xres.view(DType::f32, {T, H}));
  const CombineParams cp{out.at<const float>(), dest.at<const int32_t>(), wts.at<const float>(),
                         c.shared ? sh.at<const float>() : nullptr, H, c.gate ? shg.at<const float>() : nullptr, 1,
                         xres.at<float>(), H, int(T), int(H), int(k)};
  cuda_emulation::launch(dim3(std::min(cuda_step::grid_for(T * H, 256), 2u)), 256, 0,
                         [&](unsigned char*) { combine_slots(cp); });

  // The CPU layer: the shared part first (as SparseMoe::forward), the routed slots onto it, then the residual.
  std::vector<GatedMlp> experts;
  std::vector<PlainMlp> plain_experts;
  for (int64_t e = 0; e < E; ++e) {
    const Linear up = Linear::from_weights(wu[size_t(e)].view, {}, "u"), down = Linear::from_weights(wd[size_t(e)].view, {}, "d");
    if (c.plain) plain_experts.emplace_back(up, down, Activation::relu2, "expert");
    else experts.emplace_back(Linear::from_weights(wg[size_t(e)].view, {}, "g"), up, down, Activation::silu, "expert");
  }
  std::vector<float> moe(size_t(T * H), 0.f), sums(size_t(T * H));
  for (int64_t t = 0; t < T; ++t) {
    const float s = c.gate ? 1.f / (1.f + std::exp(-gate.at(t))) : 1.f;
    for (int64_t i = 0; i < H; ++i) {
      if (c.shared) moe[size_t(t * H + i)] = c.gate ? shared.at(t * H + i) * s : shared.at(t * H + i);
      // The combine's own sums from the device's expert rows, in its order: must match bit for bit.
      float acc = c.shared ? moe[size_t(t * H + i)] : 0.f;
      for (int64_t j = 0; j < k; ++j)
        acc += routing.weights[size_t(t * k + j)] * out.at<float>()[int64_t(dest.at<int32_t>()[t * k + j]) * H + i];
      sums[size_t(t * H + i)] = residual.at(t * H + i) + acc;
    }
  }
  if (c.plain) run_routed_experts(plain_experts, routing, k, xs.data(), T, moe.data(), /*accumulate=*/true);
  else run_routed_experts(experts, routing, k, xs.data(), T, moe.data(), /*accumulate=*/true);
  float scale = 0.f, worst = 0.f;
  int64_t worst_at = 0;
  for (int64_t q = 0; q < T * H; ++q) {
    ASSERT_EQ(xres.at<float>()[q], sums[size_t(q)]) << "combine at token " << q / H << " column " << q % H;
    scale = std::max(scale, std::abs(moe[size_t(q)]));
    const float err = std::abs(xres.at<float>()[q] - residual.at(q) - moe[size_t(q)]);
    if (err > worst) worst = err, worst_at = q;
  }
  // bf16 activations against the CPU's f32 ones: a wrong row, expert or slot is off by the scale itself.
  EXPECT_LE(worst, 0.02f * scale + 1e-4f) << "token " << worst_at / H << " column " << worst_at % H << ", scale "
                                          << scale;
}

TEST(EmulatedMoe, MatchesTheCpuExpertsOnRaggedLoads) {
  uint64_t seed = 1;
  check({1, 8, 2, 64, 32}, seed++);               // a decode token: two CTAs per column block
  check({1, 16, 8, 64, 48, true, true}, seed++);  // Qwen3-Next's shape: top 8 and a gated shared expert
  check({100, 16, 1, 48, 40}, seed++);            // top 1 (Switch-like): 16 segments, idle experts
  check({100, 12, 2, 40, 24, true}, seed++);      // an ungated shared expert (DeepSeek)
  check({100, 32, 8, 64, 32, true, true}, seed++);
  check({37, 6, 2, 36, 20}, seed++);              // K = 36 and 20: element-wise staging
}

// bf16 normed rows, as the GPU runner hands every feed-forward: gathered as they are.
TEST(EmulatedMoe, Bf16RowsMatchTheCpuExperts) {
  uint64_t seed = 30;
  auto bf16 = [](Case c) {
    c.h = DType::bf16;
    return c;
  };
  check(bf16({1, 8, 2, 64, 32}), seed++);
  check(bf16({100, 16, 8, 64, 48, true, true}), seed++);
  check(bf16({37, 6, 2, 36, 20, true}), seed++);
  check(bf16({100, 16, 6, 48, 40, true, false, TileKind::large, true}), seed++);
}

TEST(EmulatedMoe, LargeTilesAndOneBusyExpert) {
  uint64_t seed = 50;
  check({100, 4, 2, 64, 32, false, false, TileKind::large}, seed++);
  check({70, 1, 1, 32, 16, true, true, TileKind::large}, seed++);  // one expert: every token's only choice
  check({130, 3, 1, 32, 16}, seed++);                            // a segment over two small tiles
}

// Past kGroupOneCtaMax entries the grouping runs over several CTAs (moe_group_cases.cc checks it alone): the
// gather, the grouped GEMMs and the combine read its output as they read the single CTA's.
TEST(EmulatedMoe, MultiCtaGroupingFeedsTheDispatch) {
  uint64_t seed = 70;
  check({300, 16, 8, 32, 16, true, true}, seed++);                     // 2400 entries: 3 CTAs
  check({700, 4, 4, 32, 16, false, false, TileKind::large}, seed++);  // 2800 entries, 700 rows per expert
}

// The f32 router against Linear::forward over the same f32 weights: within f32 summation-order error (a bound from
// the sum of |x w|), rows padded, H off a multiple of 32, the grid-stride loop over several rounds; x f32, or bf16
// rows (the GPU runner's) against the CPU over the same rounded values.
TEST(EmulatedMoe, F32RouterMatchesTheCpuLinear) {
  for (auto [T, E, H, xt] : std::vector<std::tuple<int64_t, int64_t, int64_t, DType>>{
           {1, 8, 64, DType::f32}, {37, 60, 100, DType::f32}, {5, 256, 33, DType::f32}, {1, 8, 64, DType::bf16},
           {37, 60, 100, DType::bf16}}) {
    SCOPED_TRACE("T " + std::to_string(T) + " E " + std::to_string(E) + " H " + std::to_string(H) + " x " +
                 dtype_name(xt));
    const int64_t ldx = H + 3;
    const size_t es = dtype_size(xt);
    HostTensor x(xt, {T, H}, uint64_t(T + E)), w(DType::f32, {E, H}, uint64_t(H), 0.2f);
    Buf xd(size_t(T * ldx), xt), wd(size_t(E * H), DType::f32), logits(size_t(T * E), DType::f32);
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(xd.mem.data() + size_t(t * ldx) * es, static_cast<uint8_t*>(x.view.data) + size_t(t * H) * es,
                  size_t(H) * es);
    std::memcpy(wd.mem.data(), w.view.data, size_t(E * H) * 4);
    TensorView xv = xd.view(xt, {T, H});
    xv.strides[0] = ldx;
    check_router_logits_cuda(xv, wd.view(DType::f32, {E, H}), logits.view(DType::f32, {T, E}));
    const RouterParams p{xd.mem.data(), ldx, wd.at<const float>(), logits.at<float>(), int(T), int(E), int(H)};
    cuda_emulation::launch(dim3(std::min(cuda_step::grid_for(T * E, 8), 3u)), 256, 0, [&](unsigned char*) {
      if (xt == DType::bf16) router_dots<__nv_bfloat16>(p);
      else router_dots<float>(p);
    });
    std::vector<float> xs(static_cast<size_t>(T * H)), want(static_cast<size_t>(T * E));
    for (int64_t q = 0; q < T * H; ++q) xs[size_t(q)] = x.at(q);
    Linear::from_weights(w.view, {}, "router").forward(xs.data(), T, want.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) {
        double mag = 0;
        for (int64_t i = 0; i < H; ++i) mag += std::abs(double(x.at(t * H + i)) * w.at(e * H + i));
        ASSERT_NEAR(logits.at<float>()[t * E + e], want[size_t(t * E + e)], 4e-7 * mag + 1e-30)
            << "token " << t << " expert " << e;
      }
  }
}

// Nemotron-H's experts: ungated relu² MLPs, its shared expert ungated too.
TEST(EmulatedMoe, PlainExpertsMatchTheCpu) {
  uint64_t seed = 80;
  check({1, 16, 6, 64, 48, false, false, TileKind::small, true}, seed++);
  check({100, 16, 6, 48, 40, true, false, TileKind::small, true}, seed++);
  check({100, 2, 1, 32, 24, true, false, TileKind::large, true}, seed++);
}

// The in-place activation against apply_activation_inplace, every activation, within a few f32 ulp.
TEST(EmulatedMoe, ActivationInPlaceMatchesTheCpu) {
  const int64_t n = 1000;
  HostTensor x(DType::f32, {n}, 7, 3.f);
  auto run = [&](auto act_tag, Activation act) {
    SCOPED_TRACE(int(act));
    Buf xd(size_t(n), DType::f32);
    std::memcpy(xd.mem.data(), x.view.data, size_t(n) * 4);
    const ActivationParams p{xd.at<float>(), n};
    cuda_emulation::launch(dim3(2), 256, 0, [&](unsigned char*) { activate_in_place<decltype(act_tag)::value>(p); });
    std::vector<float> want(static_cast<const float*>(x.view.data), static_cast<const float*>(x.view.data) + n);
    apply_activation_inplace(act, want.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(xd.at<float>()[i], want[size_t(i)], 4e-6f * std::abs(want[size_t(i)]) + 1e-7f) << "x " << x.at(i);
  };
  run(std::integral_constant<Activation, Activation::silu>{}, Activation::silu);
  run(std::integral_constant<Activation, Activation::gelu_tanh>{}, Activation::gelu_tanh);
  run(std::integral_constant<Activation, Activation::gelu>{}, Activation::gelu);
  run(std::integral_constant<Activation, Activation::relu2>{}, Activation::relu2);
}

TEST(EmulatedMoe, PicksTheTileFromTheAverageLoad) {
  EXPECT_EQ(moe_tile(8, 128), TileKind::small);
  EXPECT_EQ(moe_tile(4096 * 8, 128), TileKind::large);
  EXPECT_EQ(moe_tile(127 * 8, 8), TileKind::small);
  EXPECT_EQ(moe_tile_rows(TileKind::large), 128);
  EXPECT_EQ(moe_tile_rows(TileKind::small), 64);
}

}  // namespace
}  // namespace attnzoo
