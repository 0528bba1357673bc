#include "bench/cuda_moe_bench.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/device_fill.h"
#include "core/error.h"
#include "layers/activations.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/moe.h"

namespace attnzoo::bench {
namespace {

// bf16 noise widened to f32 on the host (the bytes brought back from any device): the CPU twins take f32 rows,
// and the f32 router holds values bf16 can hold, so both sides read the same numbers.
std::vector<float> widened(const DeviceBuffer& b, size_t count, Stream stream) {
  std::vector<uint16_t> bits(count);
  b.download(bits.data(), count * 2, stream);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t w = uint32_t(bits[i]) << 16;
    std::memcpy(&out[i], &w, 4);
  }
  return out;
}

LinearRow moe_router_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t T = c["T"], E = c["E"], H = c["H"], k = c["top_k"];
    const DeviceBuffer h = noise_buffer(device, size_t(T * H) * 2, 81, stream);
    const std::vector<float> w_host = widened(noise_buffer(device, size_t(E * H) * 2, 82, stream), size_t(E * H), stream);
    RouteCudaOptions opts;
    opts.top_k = k, opts.order = RouteOrder::softmax_then_top_k, opts.normalize = true;  // Qwen3-MoE's norm_topk_prob
    if (!device.is_cuda()) {
      const std::vector<float> x = widened(h, size_t(T * H), stream);
      const Linear router = Linear::from_weights(
          TensorView::contiguous(const_cast<float*>(w_host.data()), DType::f32, {E, H}), {}, "router");
      std::vector<float> logits(static_cast<size_t>(T * E));
      MoeRouting out;
      return timer([&] {
        router.forward(x.data(), T, logits.data());
        route_softmax_top_k(logits.data(), T, E, k, opts.normalize, out);
      });
    }
#if ATTNZOO_WITH_CUDA
    const DeviceBuffer w(device, w_host.size() * 4), logits(device, size_t(T * E) * 4), ids(device, size_t(T * k) * 4),
        weights(device, size_t(T * k) * 4);
    w.upload(w_host.data(), w_host.size() * 4, stream);
    const TensorView hv = view_on(h, DType::bf16, {T, H}), wv = view_on(w, DType::f32, {E, H});
    const TensorView lv = view_on(logits, DType::f32, {T, E}), iv = view_on(ids, DType::i32, {T, k}),
                     pv = view_on(weights, DType::f32, {T, k});
    check_router_logits_cuda(hv, wv, lv);
    check_route_top_k_cuda(lv, iv, pv, opts);
    return timer([&] {
      router_logits_cuda(hv, wv, lv, stream);
      route_top_k_cuda(lv, iv, pv, opts, stream);
    });
#else
    throw DeviceError("moe router: this build has no CUDA");
#endif
  });
}

// Token t's slot j goes to expert (t top_k + j) mod E: k distinct experts per token (top_k <= E), every expert
// n / E rows (the rest spread one each), the weights 1 / top_k.
MoeRouting balanced_routing(int64_t T, int64_t E, int64_t k) {
  MoeRouting r;
  for (int64_t i = 0; i < T * k; ++i) {
    r.experts.push_back(int32_t(i % E));
    r.weights.push_back(1.f / float(k));
  }
  return r;
}

LinearRow moe_experts_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t T = c["T"], E = c["E"], k = c["top_k"], H = c["H"], I = c["I"];
    [[maybe_unused]] const int64_t n = T * k;  // the routed rows (the GPU path's)
    const MoeRouting routing = balanced_routing(T, E, k);
    const DeviceBuffer h = noise_buffer(device, size_t(T * H) * 2, 83, stream);
    const DeviceBuffer w_gu = noise_buffer(device, size_t(E * 2 * I * H) * 2, 84, stream);  // [E, gate | up, H]
    const DeviceBuffer w_down = noise_buffer(device, size_t(E * H * I) * 2, 85, stream);    // [E, H, I]
    const DeviceBuffer x = f32_buffer(device, size_t(T * H), 0.f, stream);                // the residual stream
    if (!device.is_cuda()) {
      std::vector<GatedMlp> experts;
      const size_t m = size_t(I * H);
      auto slice = [&](const DeviceBuffer& w, size_t at, int64_t rows, int64_t cols) {
        return TensorView::contiguous(static_cast<uint16_t*>(w.data()) + at, DType::bf16, {rows, cols});
      };
      for (int64_t e = 0; e < E; ++e)
        experts.emplace_back(Linear::from_weights(slice(w_gu, size_t(e) * 2 * m, I, H), {}, "gate"),
                             Linear::from_weights(slice(w_gu, size_t(e) * 2 * m + m, I, H), {}, "up"),
                             Linear::from_weights(slice(w_down, size_t(e) * m, H, I), {}, "down"), Activation::silu,
                             "expert");
      const std::vector<float> rows = widened(h, size_t(T * H), stream);
      return timer([&] { run_routed_experts(experts, routing, k, rows.data(), T, x.as<float>(), true); });
    }
#if ATTNZOO_WITH_CUDA
    const DeviceBuffer ids(device, size_t(n) * 4), weights(device, size_t(n) * 4);
    ids.upload(routing.experts.data(), size_t(n) * 4, stream);
    weights.upload(routing.weights.data(), size_t(n) * 4, stream);
    const DeviceBuffer offsets(device, size_t(E + 1) * 4), tiles(device, size_t(E + 1) * 4),
        source(device, size_t(n) * 4), dest(device, size_t(n) * 4), gathered(device, size_t(n * H) * 2),
        gu(device, size_t(n * 2 * I) * 4), out(device, size_t(n * H) * 4);
    const int64_t scratch = moe_group_scratch(n, E);
    const DeviceBuffer counts(device, size_t(std::max<int64_t>(scratch, 1)) * 4);
    const MoeGroupingCuda g{view_on(offsets, DType::i32, {E + 1}), view_on(tiles, DType::i32, {E + 1}),
                            view_on(source, DType::i32, {n}), view_on(dest, DType::i32, {n}),
                            scratch > 0 ? view_on(counts, DType::i32, {scratch}) : TensorView{}};
    const cuda_gemm::TileKind tile = moe_tile(n, E);
    const TensorView idv = view_on(ids, DType::i32, {T, k}), hv = view_on(h, DType::bf16, {T, H});
    const TensorView gathered_v = view_on(gathered, DType::bf16, {n, H}), gu_v = view_on(gu, DType::f32, {n, 2 * I});
    const TensorView wgu = view_on(w_gu, DType::bf16, {E, 2 * I, H}), wd = view_on(w_down, DType::bf16, {E, H, I});
    const TensorView out_v = view_on(out, DType::f32, {n, H}), wv = view_on(weights, DType::f32, {T, k});
    const TensorView xv = view_on(x, DType::f32, {T, H});
    // gate | up halves of one [n, 2I] row, as DeviceMoe reads them; SiLU(gate) * up into the gate half.
    TensorView act = view_on(gu, DType::f32, {n, I}), up = act;
    up.data = gu.as<float>() + I;
    act.strides[0] = up.strides[0] = 2 * I;
    check_moe_group_cuda(idv, E, moe_tile_rows(tile), g);
    check_moe_gather_cuda(hv, g.source, k, gathered_v);
    check_grouped_gemm_cuda(gathered_v, wgu, g, gu_v);
    check_grouped_gemm_cuda(act, wd, g, out_v);
    check_moe_combine_cuda(out_v, g.dest, wv, nullptr, nullptr, xv);
    return timer([&] {
      moe_group_cuda(idv, E, moe_tile_rows(tile), g, stream);
      moe_gather_cuda(hv, g.source, k, gathered_v, stream);
      grouped_gemm_cuda(gathered_v, wgu, g, tile, gu_v, stream);
      gated_activation_cuda(Activation::silu, act, up, act, stream);
      grouped_gemm_cuda(act, wd, g, tile, out_v, stream);
      moe_combine_cuda(out_v, g.dest, wv, nullptr, nullptr, xv, stream);
    });
#else
    throw DeviceError("moe experts: this build has no CUDA");
#endif
  });
}

}  // namespace

std::vector<LinearCase> moe_router_cases(Scale s) {
  if (s == Scale::tiny) return {{"moe_router", {{"T", 5}, {"E", 8}, {"H", 64}, {"top_k", 2}}}};
  std::vector<LinearCase> out;
  for (int64_t T : {int64_t(64), int64_t(4096)})  // Qwen3-30B-A3B: a decode step of 64 sequences, a prefill
    out.push_back({"moe_router", {{"T", T}, {"E", 128}, {"H", 2048}, {"top_k", 8}}});
  return out;
}

std::vector<LinearCase> moe_experts_cases(Scale s) {
  if (s == Scale::tiny) return {{"moe_experts", {{"T", 5}, {"E", 8}, {"top_k", 2}, {"H", 64}, {"I", 32}}}};
  std::vector<LinearCase> out;
  for (int64_t T : {int64_t(64), int64_t(4096)})
    out.push_back({"moe_experts", {{"T", T}, {"E", 128}, {"top_k", 8}, {"H", 2048}, {"I", 768}}});
  return out;
}

double moe_router_bytes(const LinearCase& c) {
  const double T = double(c["T"]), E = double(c["E"]), H = double(c["H"]);
  return E * H * 4 + T * H * 2 + T * E * 4 + T * double(c["top_k"]) * 8;
}

double moe_experts_bytes(const LinearCase& c) {
  const double touched = double(std::min(c["E"], c["T"] * c["top_k"]));
  return touched * 3 * double(c["I"]) * double(c["H"]) * 2 + double(c["T"]) * double(c["H"]) * (2 + 8);
}

double moe_experts_flops(const LinearCase& c) {
  return 2.0 * double(c["T"]) * double(c["top_k"]) * 3 * double(c["I"]) * double(c["H"]);
}

std::vector<LinearRow> run_moe_router_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(moe_router_cases(s), moe_router_row, device, stream, timer);
}

std::vector<LinearRow> run_moe_experts_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(moe_experts_cases(s), moe_experts_row, device, stream, timer);
}

std::string format_moe_text(const std::vector<LinearRow>& router, const std::vector<LinearRow>& experts,
                            double copy_gbps, double gemm_tflops) {
  return format_bandwidth_text(
             "MoE router (f32 router over bf16 rows, softmax top-k)          median ms   GB/s read + written   of copy\n",
             router, moe_router_bytes, copy_gbps) +
         format_bandwidth_flops_text(
             "MoE experts (group, gather, grouped GEMMs, combine; balanced)   median ms   GB/s of weights   of copy"
             "   TFLOP/s   of GEMM\n",
             experts, moe_experts_bytes, moe_experts_flops, copy_gbps, gemm_tflops);
}

std::string format_moe_router_json(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_json(rows, moe_router_bytes, "bytes", copy_gbps);
}

std::string format_moe_experts_json(const std::vector<LinearRow>& rows, double copy_gbps, double gemm_tflops) {
  return format_bandwidth_flops_json(rows, moe_experts_bytes, moe_experts_flops, copy_gbps, gemm_tflops);
}

}  // namespace attnzoo::bench
