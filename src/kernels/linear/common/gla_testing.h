#pragma once
// Test inputs for the gated-linear group's device tests (the seam in gla_device_test.cc, the CUDA kernel in
// cuda/gla_recurrent_cuda_test.cc): one case describes a family's call, GlaInputs owns its host tensors, and
// run_gla_entry calls the family's public entry for a path, so the tests exercise what callers call.
#include <random>
#include <string>
#include <vector>

#include "kernels/linear/gla/gla.h"
#include "kernels/linear/linear_attention/linear_attention.h"
#include "kernels/linear/retention/retention.h"
#include "kernels/linear/simple_gla/simple_gla.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

enum class GlaFamily { linear_attn, retention, simple_gla, gla };

struct GlaDeviceCase {
  GlaFamily family = GlaFamily::gla;
  int64_t B = 1, T = 8, H = 2, HV = 2, K = 32, V = 32;
  std::vector<int32_t> cu_seqlens{};  // an initializer, so designated initializers may leave it out
  float g_min = -0.1f, g_max = 0.f;  // data-dependent log decays drawn from [g_min, g_max] (simple GLA, GLA)
  bool g_gamma = false;              // simple GLA: a constant log decay per head as well
  bool data_gate = true;             // simple GLA: with g (without, g_gamma alone decays)
  FeatureMap feature_map = FeatureMap::identity;  // linear attention
  bool normalize = false;                          // linear attention
  bool initial_state = false;
  DType dtype = DType::f32;      // q, k, v, g
  DType out_dtype = DType::f32;  // o
  int64_t chunk_size = 64;       // the chunked entries'
  int64_t num_seqs() const { return cu_seqlens.empty() ? B : int64_t(cu_seqlens.size()) - 1; }
  std::string label() const {
    static const char* families[] = {"linear_attn", "retention", "simple_gla", "gla"};
    return std::string(families[int(family)]) + " B=" + std::to_string(B) + " T=" + std::to_string(T) +
           " H=" + std::to_string(H) + " HV=" + std::to_string(HV) + " K=" + std::to_string(K) +
           " V=" + std::to_string(V) + " g=[" + std::to_string(g_min) + "," + std::to_string(g_max) + "]" +
           (g_gamma ? " g_gamma" : "") + (data_gate ? "" : " no-g") + " phi=" + std::to_string(int(feature_map)) +
           (normalize ? " normalize" : "") + (initial_state ? " init" : "") + (cu_seqlens.empty() ? "" : " varlen") +
           (dtype == DType::bf16 ? " bf16" : dtype == DType::f16 ? " f16" : "") +
           (out_dtype == DType::bf16 ? " o=bf16" : "") + " chunk=" + std::to_string(chunk_size);
  }
};

// The views one call takes; the options carry the states and cu_seqlens.
struct GlaEntryArgs {
  TensorView q, k, v, g, g_gamma, o;
  LinearAttentionOptions opts;
};

inline void run_gla_entry(GlaFamily family, GlaPath path, const GlaEntryArgs& a) {
  const bool chunk = path == GlaPath::chunk, recurrent = path == GlaPath::recurrent;
  switch (family) {
    case GlaFamily::linear_attn:
      return chunk ? chunk_linear_attn(a.q, a.k, a.v, a.o, a.opts)
                   : recurrent ? recurrent_linear_attn(a.q, a.k, a.v, a.o, a.opts)
                               : linear_attn_reference(a.q, a.k, a.v, a.o, a.opts);
    case GlaFamily::retention:
      return chunk ? chunk_retention(a.q, a.k, a.v, a.o, a.opts)
                   : recurrent ? recurrent_retention(a.q, a.k, a.v, a.o, a.opts)
                               : retention_reference(a.q, a.k, a.v, a.o, a.opts);
    case GlaFamily::simple_gla:
      return chunk ? chunk_simple_gla(a.q, a.k, a.v, a.g, a.g_gamma, a.o, a.opts)
                   : recurrent ? recurrent_simple_gla(a.q, a.k, a.v, a.g, a.g_gamma, a.o, a.opts)
                               : simple_gla_reference(a.q, a.k, a.v, a.g, a.g_gamma, a.o, a.opts);
    case GlaFamily::gla:
      return chunk ? chunk_gla(a.q, a.k, a.v, a.g, a.o, a.opts)
                   : recurrent ? recurrent_gla(a.q, a.k, a.v, a.g, a.o, a.opts)
                               : gla_reference(a.q, a.k, a.v, a.g, a.o, a.opts);
  }
}

inline void fill_gla_uniform(HostTensor& t, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.view.data, t.view.dtype, i, dist(rng));
}

// Linear attention's feature map, and whether its output is divided by the running key sum (z).
struct GlaLinearVariant {
  FeatureMap feature_map;
  bool normalize;
};

// One of each family's configurations: GLA's per-channel decays, simple GLA with g, a g_gamma or both, retention,
// then linear attention under each of `linear` (by default every feature map, elu + 1 normalised).
inline std::vector<GlaDeviceCase> gla_family_cases(const GlaDeviceCase& shape,
                                                   const std::vector<GlaLinearVariant>& linear = {
                                                       {FeatureMap::identity, false},
                                                       {FeatureMap::relu, false},
                                                       {FeatureMap::elu_plus_one, true}}) {
  std::vector<GlaDeviceCase> cases;
  auto add = [&](GlaFamily f, auto&& tweak) {
    GlaDeviceCase c = shape;
    c.family = f;
    tweak(c);
    cases.push_back(c);
  };
  add(GlaFamily::gla, [](GlaDeviceCase&) {});
  add(GlaFamily::simple_gla, [](GlaDeviceCase&) {});
  add(GlaFamily::simple_gla, [](GlaDeviceCase& c) { c.g_gamma = true; });
  add(GlaFamily::simple_gla, [](GlaDeviceCase& c) { c.g_gamma = true, c.data_gate = false; });
  add(GlaFamily::retention, [](GlaDeviceCase&) {});
  for (const GlaLinearVariant& l : linear)
    add(GlaFamily::linear_attn, [&](GlaDeviceCase& c) { c.feature_map = l.feature_map, c.normalize = l.normalize; });
  return cases;
}

// The inputs of one case, owned: q, k, v at unit scale, g uniform in the case's range, g_gamma RetNet-like,
// states and z at unit scale (z positive, as a running sum of elu + 1 keys is).
struct GlaInputs {
  HostTensor q, k, v, g, g_gamma, init, z;
  int64_t N;
  GlaInputs(const GlaDeviceCase& c, uint64_t seed = 1)
      : q(c.dtype, {c.B, c.T, c.H, c.K}, seed),
        k(c.dtype, {c.B, c.T, c.H, c.K}, seed + 1),
        v(c.dtype, {c.B, c.T, c.HV, c.V}, seed + 2),
        g(c.dtype, c.family == GlaFamily::gla ? std::vector<int64_t>{c.B, c.T, c.HV, c.K}
                                              : std::vector<int64_t>{c.B, c.T, c.HV},
          0, 0.f),
        g_gamma(DType::f32, {c.HV}, 0, 0.f),
        init(DType::f32, {c.num_seqs(), c.HV, c.K, c.V}, seed + 3),
        z(DType::f32, {c.num_seqs(), 1, c.H, c.K}, 0, 0.f),
        N(c.num_seqs()) {
    fill_gla_uniform(g, c.g_min, c.g_max, seed + 4);
    for (int64_t h = 0; h < c.HV; ++h) g_gamma.view.ptr<float>()[h] = -0.05f * float(h + 1);
    fill_gla_uniform(z, 0.5f, 2.f, seed + 5);
  }

  // The call's views with `o` and (when not null) `final_state` / `final_z` as outputs, all on the host.
  GlaEntryArgs args(const GlaDeviceCase& c, const HostTensor& o, const HostTensor* final_state,
                    const HostTensor* final_z = nullptr) const {
    GlaEntryArgs a;
    a.q = q.view, a.k = k.view, a.v = v.view, a.o = o.view;
    if (c.family == GlaFamily::gla || (c.family == GlaFamily::simple_gla && c.data_gate)) a.g = g.view;
    if (c.family == GlaFamily::simple_gla && c.g_gamma) a.g_gamma = g_gamma.view;
    if (c.initial_state) a.opts.initial_state = init.view;
    if (final_state) a.opts.final_state = final_state->view;
    if (!c.cu_seqlens.empty()) {
      a.opts.cu_seqlens = c.cu_seqlens.data();
      a.opts.cu_seqlens_len = int64_t(c.cu_seqlens.size());
    }
    a.opts.chunk_size = c.chunk_size;
    a.opts.feature_map = c.feature_map;
    a.opts.normalize = c.normalize;
    if (c.normalize && c.initial_state) a.opts.initial_z = z.view;
    if (c.normalize && final_z) a.opts.final_z = final_z->view;
    return a;
  }
};

// The problem each family's front end builds (gla.cc, simple_gla.cc, retention.cc, linear_attention.cc), over
// device copies (the emulator's); `gamma` keeps retention's host decays alive.
inline GlaProblem gla_family_problem(GlaFamily f, const GlaEntryArgs& a, std::vector<float>& gamma) {
  switch (f) {
    case GlaFamily::gla: return make_gla_problem(a.q, a.k, a.v, a.g, GateKind::channel, TensorView{}, a.o, a.opts);
    case GlaFamily::simple_gla: return make_gla_problem(a.q, a.k, a.v, a.g, GateKind::scalar, a.g_gamma, a.o, a.opts);
    case GlaFamily::retention: {
      gamma = retention_log_decays(a.v.shape[2]);
      const TensorView g_gamma = TensorView::contiguous(gamma.data(), DType::f32, {int64_t(gamma.size())});
      return make_gla_problem(a.q, a.k, a.v, TensorView{}, GateKind::scalar, g_gamma, a.o, a.opts);
    }
    case GlaFamily::linear_attn: {
      GlaProblem p = make_gla_problem(a.q, a.k, a.v, TensorView{}, GateKind::none, TensorView{}, a.o, a.opts);
      p.feature_map = a.opts.feature_map;
      if (a.opts.normalize) set_gla_normalizer(p, a.opts.initial_z, a.opts.final_z);
      return p;
    }
  }
  return {};
}

}  // namespace attnzoo::testing
