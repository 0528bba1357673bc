// The CUDA MoE dispatch (moe_cuda.h) against run_routed_experts (moe.h): a CPU routing uploaded, then grouping,
// gather, gate | up and down as grouped GEMMs, the activation over the halves and the combine into a residual, with
// a gated shared expert's rows; a decode token (T = 1, top 8 of 64) and a prefill (T = 300, top 2 of 16) whose
// loads leave experts idle, within bf16 tolerance; the grouping alone at prefill scale (many CTAs), exactly. Refusals
// are host-only and run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/activations.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "layers/moe.h"
#include "testing/device_test_util.h"
#include "testing/random_routing.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using cuda_gemm::TileKind;
using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

MoeGroupingCuda fake_grouping(int64_t E, int64_t n) {
  const int64_t scratch = moe_group_scratch(n, E);
  return {fake_cuda_view(DType::i32, {E + 1}), fake_cuda_view(DType::i32, {E + 1}), fake_cuda_view(DType::i32, {n}),
          fake_cuda_view(DType::i32, {n}), scratch > 0 ? fake_cuda_view(DType::i32, {scratch}) : TensorView{}};
}

TEST(MoeCuda, RefusesNamingTheArgument) {
  const int64_t T = 5, k = 2, E = 8, n = T * k, H = 32, N = 48;
  const TensorView ids = fake_cuda_view(DType::i32, {T, k});
  const MoeGroupingCuda g = fake_grouping(E, n);
  EXPECT_NO_THROW(check_moe_group_cuda(ids, E, 64, g));
  TensorView host = ids;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_moe_group_cuda(host, E, 64, g); }, "experts: lives on cpu");
  expect_error<DTypeError>([&] { check_moe_group_cuda(fake_cuda_view(DType::i64, {T, k}), E, 64, g); },
                           "experts: dtype int64");
  expect_error<ArgumentError>([&] { check_moe_group_cuda(ids, 1025, 64, fake_grouping(1025, n)); },
                              "num_experts: must be in [1, 1024]");
  expect_error<ArgumentError>([&] { check_moe_group_cuda(ids, E, 64, fake_grouping(E + 1, n)); },
                              "offsets: expected shape [9]");
  expect_error<ArgumentError>([&] { check_moe_group_cuda(ids, E, 64, fake_grouping(E, n + 1)); },
                              "source: expected shape [10]");
  {  // a prefill's grouping spreads over CTAs and needs their counts: E per CTA
    const TensorView prefill = fake_cuda_view(DType::i32, {4096, 8});
    MoeGroupingCuda big = fake_grouping(128, 4096 * 8);
    EXPECT_EQ(moe_group_scratch(4096 * 8, 128), 128 * 32);
    EXPECT_EQ(moe_group_scratch(n, E), 0);
    EXPECT_NO_THROW(check_moe_group_cuda(prefill, 128, 128, big));
    big.counts = TensorView{};
    expect_error<ArgumentError>([&] { check_moe_group_cuda(prefill, 128, 128, big); }, "counts: ");
    big.counts = fake_cuda_view(DType::i32, {128 * 31});
    expect_error<ArgumentError>([&] { check_moe_group_cuda(prefill, 128, 128, big); }, "counts: expected shape [4096]");
  }

  const TensorView h = fake_cuda_view(DType::f32, {T, H}), x = fake_cuda_view(DType::bf16, {n, H});
  EXPECT_NO_THROW(check_moe_gather_cuda(h, g.source, k, x));
  EXPECT_NO_THROW(check_moe_gather_cuda(fake_cuda_view(DType::bf16, {T, H}), g.source, k, x));  // the runner's rows
  expect_error<DTypeError>([&] { check_moe_gather_cuda(fake_cuda_view(DType::i32, {T, H}), g.source, k, x); },
                           "h: dtype int32 is not supported");
  expect_error<DTypeError>([&] { check_moe_gather_cuda(h, g.source, k, fake_cuda_view(DType::f32, {n, H})); },
                           "x: dtype float32 is not supported");
  expect_error<ArgumentError>([&] { check_moe_gather_cuda(h, g.source, k, fake_cuda_view(DType::bf16, {n, H + 1})); },
                              "x: expected a contiguous [10, 32]");

  const TensorView w = fake_cuda_view(DType::bf16, {E, N, H}), y = fake_cuda_view(DType::f32, {n, N});
  EXPECT_NO_THROW(check_grouped_gemm_cuda(x, w, g, y));
  expect_error<ArgumentError>([&] { check_grouped_gemm_cuda(x, fake_cuda_view(DType::bf16, {N, H}), g, y); },
                              "w: expected a contiguous [experts, N, K]");
  expect_error<DTypeError>([&] { check_grouped_gemm_cuda(x, fake_cuda_view(DType::f32, {E, N, H}), g, y); },
                           "w: dtype float32 is not supported");
  expect_error<ArgumentError>([&] { check_grouped_gemm_cuda(x, fake_cuda_view(DType::bf16, {E, N, H + 8}), g, y); },
                              "x: K = 32, w's is 40");
  expect_error<ArgumentError>([&] { check_grouped_gemm_cuda(x, w, g, fake_cuda_view(DType::f32, {n, N + 1})); },
                              "y: expected [10, 48]");
  expect_error<ArgumentError>([&] { check_grouped_gemm_cuda(x, fake_cuda_view(DType::bf16, {E + 1, N, H}), g, y); },
                              "offsets: expected shape [10]");

  const TensorView out = fake_cuda_view(DType::f32, {n, H}), weights = fake_cuda_view(DType::f32, {T, k});
  const TensorView shared = fake_cuda_view(DType::f32, {T, H}), gate = fake_cuda_view(DType::f32, {T, 1});
  const TensorView res = fake_cuda_view(DType::f32, {T, H});
  EXPECT_NO_THROW(check_moe_combine_cuda(out, g.dest, weights, &shared, &gate, res));
  expect_error<ArgumentError>([&] { check_moe_combine_cuda(out, g.dest, weights, nullptr, &gate, res); },
                              "shared_gate: given without a shared expert");
  expect_error<ArgumentError>(
      [&] { check_moe_combine_cuda(fake_cuda_view(DType::f32, {n, H + 1}), g.dest, weights, nullptr, nullptr, res); },
      "expert_out: expected shape [10, 32]");
  expect_error<DTypeError>(
      [&] { check_moe_combine_cuda(out, g.dest, weights, nullptr, nullptr, fake_cuda_view(DType::bf16, {T, H})); },
      "x: dtype bfloat16, expected float32");

  const TensorView router = fake_cuda_view(DType::f32, {E, H}), logits = fake_cuda_view(DType::f32, {T, E});
  EXPECT_NO_THROW(check_router_logits_cuda(h, router, logits));
  EXPECT_NO_THROW(check_router_logits_cuda(fake_cuda_view(DType::bf16, {T, H}), router, logits));
  expect_error<DTypeError>([&] { check_router_logits_cuda(fake_cuda_view(DType::i32, {T, H}), router, logits); },
                           "x: dtype int32 is not supported");
  expect_error<DTypeError>([&] { check_router_logits_cuda(h, fake_cuda_view(DType::bf16, {E, H}), logits); },
                           "w: dtype bfloat16, expected float32");
  expect_error<ArgumentError>([&] { check_router_logits_cuda(h, fake_cuda_view(DType::f32, {E, H + 1}), logits); },
                              "w: expected shape [8, 32]");
  expect_error<ArgumentError>([&] { check_router_logits_cuda(h, router, fake_cuda_view(DType::f32, {T, E + 1})); },
                              "logits: expected shape [5, 8]");
}

// Each token's k distinct experts from a skewed load; experts e % 3 == 1 never chosen (idle) when enough remain.
MoeRouting skewed_routing(int64_t T, int64_t E, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> load(static_cast<size_t>(E));
  const bool idle = E - (E + 1) / 3 >= k;
  for (int64_t e = 0; e < E; ++e) load[size_t(e)] = idle && e % 3 == 1 ? 0.0 : double(e % 5 + 1);
  return testing::draw_routing(T, k, load, rng);
}

// h_dtype: the normed rows' (bf16: as the GPU runner hands them; the CPU reads the same rounded values).
void run_dispatch(int64_t T, int64_t E, int64_t k, int64_t H, int64_t I, uint64_t seed, DType h_dtype = DType::f32) {
  SCOPED_TRACE("T " + std::to_string(T) + " E " + std::to_string(E) + " top_k " + std::to_string(k) + " h " +
               dtype_name(h_dtype));
  const int64_t n = T * k;
  const MoeRouting routing = skewed_routing(T, E, k, seed);
  DeviceOperand h(h_dtype, {T, H}, seed + 1), res(DType::f32, {T, H}, seed + 2),
      shared(DType::f32, {T, H}, seed + 3), gate(DType::f32, {T, 1}, seed + 4);
  DeviceOperand w_gu(DType::bf16, {E, 2 * I, H}, seed + 5, {}, 0.2f), w_down(DType::bf16, {E, H, I}, seed + 6, {}, 0.2f);
  auto buffer = [](int64_t count, size_t elem) { return DeviceBuffer(Device::cuda(), size_t(count) * elem); };
  auto view = [](const DeviceBuffer& b, DType dtype, std::initializer_list<int64_t> shape) {
    TensorView t = TensorView::contiguous(b.data(), dtype, shape);
    t.device = Device::cuda();
    return t;
  };
  const DeviceBuffer ids = buffer(n, 4), weights = buffer(n, 4);
  ids.upload(routing.experts.data(), size_t(n) * 4);
  weights.upload(routing.weights.data(), size_t(n) * 4);
  const DeviceBuffer offsets = buffer(E + 1, 4), tiles = buffer(E + 1, 4), source = buffer(n, 4), dest = buffer(n, 4),
                     gathered = buffer(n * H, 2), gu = buffer(n * 2 * I, 4), out = buffer(n * H, 4);
  const int64_t scratch = moe_group_scratch(n, E);
  const DeviceBuffer counts = buffer(std::max<int64_t>(scratch, 1), 4);
  const MoeGroupingCuda g{view(offsets, DType::i32, {E + 1}), view(tiles, DType::i32, {E + 1}),
                          view(source, DType::i32, {n}), view(dest, DType::i32, {n}),
                          scratch > 0 ? view(counts, DType::i32, {scratch}) : TensorView{}};
  const TileKind tile = moe_tile(n, E);
  moe_group_cuda(view(ids, DType::i32, {T, k}), E, moe_tile_rows(tile), g);
  moe_gather_cuda(h.device_view(), g.source, k, view(gathered, DType::bf16, {n, H}));
  grouped_gemm_cuda(view(gathered, DType::bf16, {n, H}), w_gu.device_view(), g, tile, view(gu, DType::f32, {n, 2 * I}));
  TensorView g_half = view(gu, DType::f32, {n, I}), u_half = g_half;
  u_half.data = static_cast<float*>(gu.data()) + I;
  g_half.strides[0] = u_half.strides[0] = 2 * I;
  gated_activation_cuda(Activation::silu, g_half, u_half, g_half);
  grouped_gemm_cuda(g_half, w_down.device_view(), g, tile, view(out, DType::f32, {n, H}));
  const TensorView sd = shared.device_view(), gd = gate.device_view();
  moe_combine_cuda(view(out, DType::f32, {n, H}), g.dest, view(weights, DType::f32, {T, k}), &sd, &gd, res.device_view());
  synchronize(current_stream());
  std::vector<float> got(static_cast<size_t>(T * H));
  res.download();
  for (int64_t q = 0; q < T * H; ++q) got[size_t(q)] = res.at(q);

  // The CPU layer over the same weights, its shared part first as SparseMoe::forward has it.
  std::vector<GatedMlp> experts;
  const size_t m = size_t(I * H);
  for (int64_t e = 0; e < E; ++e) {
    auto slice = [&](const DeviceOperand& w, size_t at, int64_t rows, int64_t cols) {
      return TensorView::contiguous(static_cast<uint16_t*>(w.view.data) + at, DType::bf16, {rows, cols});
    };
    experts.emplace_back(Linear::from_weights(slice(w_gu, size_t(e) * 2 * m, I, H), {}, "g"),
                         Linear::from_weights(slice(w_gu, size_t(e) * 2 * m + m, I, H), {}, "u"),
                         Linear::from_weights(slice(w_down, size_t(e) * m, H, I), {}, "d"), Activation::silu, "e");
  }
  std::vector<float> want(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t) {
    const float s = 1.f / (1.f + std::exp(-gate.at(t)));
    for (int64_t i = 0; i < H; ++i) want[size_t(t * H + i)] = shared.at(t * H + i) * s;
  }
  std::vector<float> x(static_cast<size_t>(T * H));
  for (int64_t q = 0; q < T * H; ++q) x[size_t(q)] = h.at(q);
  run_routed_experts(experts, routing, k, x.data(), T, want.data(), /*accumulate=*/true);
  DeviceOperand res0(DType::f32, {T, H}, seed + 2);  // the residual as it was
  float scale = 0.f, worst = 0.f;
  for (int64_t q = 0; q < T * H; ++q) {
    scale = std::max(scale, std::abs(want[size_t(q)]));
    worst = std::max(worst, std::abs(got[size_t(q)] - res0.at(q) - want[size_t(q)]));
  }
  EXPECT_LE(worst, 0.02f * scale + 1e-4f) << "scale " << scale;
}

TEST(MoeCuda, DispatchMatchesTheCpuExperts) {
  REQUIRE_GPU();
  run_dispatch(1, 64, 8, 256, 128, 1);    // a decode token
  run_dispatch(300, 16, 2, 128, 96, 2);   // a prefill, idle experts
  run_dispatch(2048, 4, 2, 128, 64, 3);   // large tiles: 1024 rows per expert on average
  run_dispatch(1, 64, 8, 256, 128, 4, DType::bf16);   // bf16 rows gathered as they are
  run_dispatch(300, 16, 2, 128, 96, 5, DType::bf16);
}

// The grouping alone at prefill scale (the multi-CTA path), on either side of its threshold, against a stable sort:
// offsets, tile prefix and the permutation exactly.
TEST(MoeCuda, GroupingIsAStableSortAtPrefillScale) {
  REQUIRE_GPU();
  for (auto [T, E, k] : std::vector<std::array<int64_t, 3>>{{256, 128, 8}, {257, 128, 8}, {4096, 128, 8},
                                                             {12800, 256, 8}, {5000, 1, 1}, {3000, 1024, 4}}) {
    SCOPED_TRACE("T " + std::to_string(T) + " E " + std::to_string(E) + " top_k " + std::to_string(k));
    const int64_t n = T * k, tile_rows = moe_tile_rows(moe_tile(n, E));
    const MoeRouting routing = skewed_routing(T, E, k, uint64_t(T + E));
    auto buffer = [](int64_t count) { return DeviceBuffer(Device::cuda(), size_t(std::max<int64_t>(count, 1)) * 4); };
    auto view = [](const DeviceBuffer& b, std::initializer_list<int64_t> shape) {
      TensorView t = TensorView::contiguous(b.data(), DType::i32, shape);
      t.device = Device::cuda();
      return t;
    };
    const int64_t scratch = moe_group_scratch(n, E);
    const DeviceBuffer ids = buffer(n), offsets = buffer(E + 1), tiles = buffer(E + 1), source = buffer(n),
                       dest = buffer(n), counts = buffer(scratch);
    ids.upload(routing.experts.data(), size_t(n) * 4);
    const MoeGroupingCuda g{view(offsets, {E + 1}), view(tiles, {E + 1}), view(source, {n}), view(dest, {n}),
                            scratch > 0 ? view(counts, {scratch}) : TensorView{}};
    moe_group_cuda(view(ids, {T, k}), E, tile_rows, g);
    std::vector<int32_t> off(static_cast<size_t>(E + 1)), til(off), src(static_cast<size_t>(n)), dst(src);
    offsets.download(off.data(), off.size() * 4);
    tiles.download(til.data(), til.size() * 4);
    source.download(src.data(), src.size() * 4);
    dest.download(dst.data(), dst.size() * 4);
    synchronize(current_stream());
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return routing.experts[size_t(a)] < routing.experts[size_t(b)]; });
    ASSERT_EQ(src, order);
    for (int64_t r = 0; r < n; ++r) ASSERT_EQ(dst[size_t(order[size_t(r)])], r) << "entry " << order[size_t(r)];
    int32_t row = 0, tile = 0;
    for (int64_t e = 0; e <= E; ++e) {
      ASSERT_EQ(off[size_t(e)], row) << "offsets[" << e << "]";
      ASSERT_EQ(til[size_t(e)], tile) << "tiles[" << e << "]";
      if (e == E) break;
      const int32_t count = int32_t(std::count(routing.experts.begin(), routing.experts.end(), int32_t(e)));
      row += count;
      tile += int32_t((count + tile_rows - 1) / tile_rows);
    }
  }
}

}  // namespace
}  // namespace attnzoo
