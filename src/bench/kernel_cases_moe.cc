// The MoE cases of kernel_cases_layers.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench/case_io.h"
#include "bench/kernel_cases_layers.h"
#include "layers/activations.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/moe.h"

namespace attnzoo::bench {
namespace {

namespace fs = std::filesystem;

struct MoeSpec {
  const char* name;
  int64_t T, E, top_k, H, I;
  bool normalize;  // norm_topk_prob
  bool shared;     // a sigmoid-gated shared expert's output added in the combine (Qwen2-MoE)
};

// N(0, 1) x scale, rounded to t.
HostArray scaled_array(DType t, std::vector<int64_t> shape, uint32_t seed, float scale) {
  HostArray a = random_array(t, std::move(shape), seed);
  for (int64_t i = 0; i < a.numel(); ++i)
    store_from_f32(a.bytes.data(), t, i, scale * load_as_f32(a.bytes.data(), t, i));
  return a;
}

std::vector<float> as_f32(const HostArray& a) {
  std::vector<float> out(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) out[size_t(i)] = load_as_f32(a.bytes.data(), a.dtype, i);
  return out;
}

float* f32_data(HostArray& a) { return reinterpret_cast<float*>(a.bytes.data()); }

std::string run_moe(const MoeSpec& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const int64_t T = c.T, E = c.E, k = c.top_k, H = c.H, I = c.I;
  [[maybe_unused]] const int64_t n = T * k;  // the routed rows (the GPU path's)
  // The runner's bf16 normed rows; an f32 router (logits of a few units); experts scaled so activations stay O(1).
  const HostArray h = random_array(DType::bf16, {T, H}, seed);
  const HostArray router = scaled_array(DType::f32, {E, H}, seed + 1, 2.f / std::sqrt(float(H)));
  const HostArray w_gate_up = scaled_array(DType::bf16, {E, 2 * I, H}, seed + 2, 1.f / std::sqrt(float(H)));
  const HostArray w_down = scaled_array(DType::bf16, {E, H, I}, seed + 3, 1.f / std::sqrt(float(I)));
  const HostArray x = random_array(DType::f32, {T, H}, seed + 4);
  const HostArray shared = random_array(DType::f32, {T, H}, seed + 5);
  const HostArray shared_gate = random_array(DType::f32, {T, 1}, seed + 6);
  HostArray experts = make_array(DType::i32, {T, k}), weights = make_array(DType::f32, {T, k});
  const std::string stem = c.name;
  const std::pair<const char*, const HostArray*> inputs[] = {{"h", &h}, {"router", &router},
      {"w_gate_up", &w_gate_up}, {"w_down", &w_down}, {"x", &x}, {"shared", &shared}, {"shared_gate", &shared_gate}};
  for (const auto& [what, a] : inputs)
    if (c.shared || std::strncmp(what, "shared", 6) != 0) write_npy(dir / (stem + "_" + what + ".npy"), *a);
  const std::string entry = "{\"name\": " + json_string(stem) + ", \"kind\": \"moe\", \"dtype\": \"bfloat16\"" +
                            ", \"T\": " + std::to_string(T) + ", \"E\": " + std::to_string(E) + ", \"top_k\": " +
                            std::to_string(k) + ", \"H\": " + std::to_string(H) + ", \"I\": " + std::to_string(I) +
                            ", \"normalize\": " + (c.normalize ? "true" : "false") + ", \"shared\": " +
                            (c.shared ? "true" : "false") + ", \"activation\": \"silu\"";
  return finish_case(entry, refused, [&] {
    HostArray out = x;
    if (!device.is_cuda()) {
      // SparseMoe::forward's path: the router's logits, the softmax top-k, the shared part, the routed experts.
      std::vector<float> rows = as_f32(h), r = as_f32(router);
      const Linear gate = Linear::from_weights(TensorView::contiguous(r.data(), DType::f32, {E, H}), {}, "router");
      std::vector<float> logits(static_cast<size_t>(T * E));
      gate.forward(rows.data(), T, logits.data());
      MoeRouting routing;
      route_softmax_top_k(logits.data(), T, E, k, c.normalize, routing);
      std::vector<GatedMlp> mlps;
      const size_t m = size_t(I * H);
      auto slice = [&](const HostArray& w, size_t at, int64_t r0, int64_t c0) {
        return TensorView::contiguous(const_cast<uint16_t*>(reinterpret_cast<const uint16_t*>(w.bytes.data())) + at,
                                      DType::bf16, {r0, c0});
      };
      for (int64_t e = 0; e < E; ++e)
        mlps.emplace_back(Linear::from_weights(slice(w_gate_up, size_t(e) * 2 * m, I, H), {}, "gate"),
                          Linear::from_weights(slice(w_gate_up, size_t(e) * 2 * m + m, I, H), {}, "up"),
                          Linear::from_weights(slice(w_down, size_t(e) * m, H, I), {}, "down"), Activation::silu,
                          "expert");
      std::vector<float> ffn(static_cast<size_t>(T * H), 0.f);
      if (c.shared) {
        const std::vector<float> s = as_f32(shared), g = as_f32(shared_gate);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t i = 0; i < H; ++i)
            ffn[size_t(t * H + i)] = s[size_t(t * H + i)] / (1.f + std::exp(-g[size_t(t)]));
      }
      run_routed_experts(mlps, routing, k, rows.data(), T, ffn.data(), true);
      for (int64_t q = 0; q < T * H; ++q) f32_data(out)[q] += ffn[size_t(q)];
      std::memcpy(experts.bytes.data(), routing.experts.data(), experts.bytes.size());
      std::memcpy(weights.bytes.data(), routing.weights.data(), weights.bytes.size());
    } else {
#if ATTNZOO_WITH_CUDA
      // DeviceMoe::forward's launches (models/cuda/device_moe.cc).
      const Placed dh = place(h, device), dr = place(router, device), dgu = place(w_gate_up, device),
                   dd = place(w_down, device), dx = place(x, device), ds = place(shared, device),
                   dg = place(shared_gate, device), de = place(experts, device), dw = place(weights, device);
      auto buffer = [&](int64_t count, size_t elem) { return DeviceBuffer(device, size_t(count) * elem); };
      auto view = [&](const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape) {
        TensorView v = TensorView::contiguous(b.data(), t, shape);
        v.device = device;
        return v;
      };
      const DeviceBuffer logits = buffer(T * E, 4), offsets = buffer(E + 1, 4), tiles = buffer(E + 1, 4),
                         source = buffer(n, 4), dest = buffer(n, 4), gathered = buffer(n * H, 2),
                         gu = buffer(n * 2 * I, 4), expert_out = buffer(n * H, 4);
      RouteCudaOptions opts;
      opts.top_k = k, opts.order = RouteOrder::softmax_then_top_k, opts.normalize = c.normalize;
      router_logits_cuda(dh.view, dr.view, view(logits, DType::f32, {T, E}));
      route_top_k_cuda(view(logits, DType::f32, {T, E}), de.view, dw.view, opts);
      const int64_t scratch = moe_group_scratch(n, E);
      const DeviceBuffer counts = buffer(std::max<int64_t>(scratch, 1), 4);
      const MoeGroupingCuda g{view(offsets, DType::i32, {E + 1}), view(tiles, DType::i32, {E + 1}),
                              view(source, DType::i32, {n}), view(dest, DType::i32, {n}),
                              scratch > 0 ? view(counts, DType::i32, {scratch}) : TensorView{}};
      const cuda_gemm::TileKind tile = moe_tile(n, E);
      moe_group_cuda(de.view, E, moe_tile_rows(tile), g);
      moe_gather_cuda(dh.view, g.source, k, view(gathered, DType::bf16, {n, H}));
      grouped_gemm_cuda(view(gathered, DType::bf16, {n, H}), dgu.view, g, tile, view(gu, DType::f32, {n, 2 * I}));
      TensorView act = view(gu, DType::f32, {n, I}), up = act;
      up.data = gu.as<float>() + I;
      act.strides[0] = up.strides[0] = 2 * I;
      gated_activation_cuda(Activation::silu, act, up, act);
      grouped_gemm_cuda(act, dd.view, g, tile, view(expert_out, DType::f32, {n, H}));
      moe_combine_cuda(view(expert_out, DType::f32, {n, H}), g.dest, dw.view, c.shared ? &ds.view : nullptr,
                       c.shared ? &dg.view : nullptr, dx.view);
      experts = fetch(de, experts);
      weights = fetch(dw, weights);
      out = fetch(dx, x);
#else
      throw DeviceError("moe: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_experts.npy"), experts);
    write_npy(dir / (stem + "_weights.npy"), weights);
    write_npy(dir / (stem + "_out.npy"), out);
  });
}

}  // namespace

void write_moe_cases(const fs::path& dir, Device device, uint32_t& seed,
                     const std::function<void(const std::string& entry, bool refused)>& add) {
  // Qwen3-MoE's routing (128 experts, top-8, renormalized) over small widths; Qwen2-MoE's (60 experts, top-4, the
  // probabilities as chosen) with its sigmoid-gated shared expert's output in the combine.
  const MoeSpec specs[] = {{"moe_qwen3", 29, 128, 8, 256, 64, true, false},
                           {"moe_qwen2_shared", 19, 60, 4, 128, 96, false, true}};
  for (const MoeSpec& c : specs) {
    bool refused = false;
    const std::string e = run_moe(c, dir, device, seed += 10, refused);
    add(e, refused);
  }
}

}  // namespace attnzoo::bench
