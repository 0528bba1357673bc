#pragma once
// Test harness shared by the delta-family gtests: builds random problems (unit-norm keys unless the kernel
// normalises them, gates of a chosen strength, betas in a chosen range), runs a family's chunked and recurrent
// forms on every SIMD target and compares outputs and final states with the double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/linear/common/delta_problem.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

struct DeltaCase {
  int64_t B = 1, T = 64, H = 2, HV = 2, K = 32, V = 32;
  DeltaGate gate = DeltaGate::head;
  float g_min = -1.f, g_max = 0.f;  // log decays drawn uniformly from [g_min, g_max]
  float beta_min = 0.1f, beta_max = 1.f;
  bool initial_state = false;
  bool l2norm = false;  // when false the test keys are unit vectors already
  std::vector<int32_t> cu_seqlens;
  int64_t chunk_size = 64;
  DType dtype = DType::f32;       // q, k, v, g, beta
  DType out_dtype = DType::f32;   // o
  double tolerance = 1e-4;        // relative RMS
  std::string label() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
           " HV=" + std::to_string(HV) + " K=" + std::to_string(K) + " V=" + std::to_string(V) +
           " g=[" + std::to_string(g_min) + "," + std::to_string(g_max) + "] beta=[" + std::to_string(beta_min) +
           "," + std::to_string(beta_max) + "] chunk=" + std::to_string(chunk_size) +
           (initial_state ? " init" : "") + (l2norm ? " l2norm" : "") +
           (cu_seqlens.empty() ? "" : " varlen");
  }
};

inline void fill_uniform(HostTensor& t, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.view.data, t.view.dtype, i, dist(rng));
}

inline void normalize_rows(HostTensor& t, int64_t n) {
  for (int64_t r = 0; r < t.numel() / n; ++r) {
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += double(t.at(r * n + i)) * t.at(r * n + i);
    const double inv = 1.0 / std::sqrt(sq + 1e-12);
    for (int64_t i = 0; i < n; ++i) store_from_f32(t.view.data, t.view.dtype, r * n + i, float(t.at(r * n + i) * inv));
  }
}

// The inputs of one case, owned.
struct DeltaInputs {
  HostTensor q, k, v, g, beta, init;
  int64_t N;
  explicit DeltaInputs(const DeltaCase& c, uint64_t seed = 1)
      : q(c.dtype, {c.B, c.T, c.H, c.K}, seed),
        k(c.dtype, {c.B, c.T, c.H, c.K}, seed + 1),
        v(c.dtype, {c.B, c.T, c.HV, c.V}, seed + 2),
        g(c.dtype, c.gate == DeltaGate::channel ? std::vector<int64_t>{c.B, c.T, c.HV, c.K}
                                                : std::vector<int64_t>{c.B, c.T, c.HV}, 0, 0.f),
        beta(c.dtype, {c.B, c.T, c.HV}, 0, 0.f),
        init(DType::f32, {c.cu_seqlens.empty() ? c.B : int64_t(c.cu_seqlens.size()) - 1, c.HV, c.K, c.V}, seed + 3,
             0.5f),
        N(c.cu_seqlens.empty() ? c.B : int64_t(c.cu_seqlens.size()) - 1) {
    if (!c.l2norm) normalize_rows(k, c.K);
    fill_uniform(g, c.g_min, c.g_max, seed + 4);
    fill_uniform(beta, c.beta_min, c.beta_max, seed + 5);
  }
  DeltaArgs args(const DeltaCase& c, HostTensor& o, HostTensor* final_state) const {
    DeltaArgs a;
    a.q = q.view;
    a.k = k.view;
    a.v = v.view;
    if (c.gate != DeltaGate::none) a.g = g.view;
    a.beta = beta.view;
    a.o = o.view;
    if (c.initial_state) a.initial_state = init.view;
    if (final_state) a.final_state = final_state->view;
    if (!c.cu_seqlens.empty()) {
      a.cu_seqlens = c.cu_seqlens.data();
      a.cu_seqlens_len = int64_t(c.cu_seqlens.size());
    }
    a.use_qk_l2norm_in_kernel = c.l2norm;
    a.chunk_size = c.chunk_size;
    return a;
  }
};

using DeltaEntry = void (*)(const DeltaArgs&);

// chunk == recurrent == reference (outputs and final states) on every target.
inline void check_delta_case(const DeltaCase& c, DeltaEntry chunk, DeltaEntry recurrent, DeltaEntry reference) {
  SCOPED_TRACE(c.label());
  const DeltaInputs in(c);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f);
  reference(in.args(c, o_ref, &s_ref));
  for_each_target([&](Target) {
    for (DeltaEntry run : {chunk, recurrent}) {
      SCOPED_TRACE(run == chunk ? "chunk" : "recurrent");
      HostTensor o(c.out_dtype, {c.B, c.T, c.HV, c.V}, 0, 0.f), s(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f);
      run(in.args(c, o, &s));
      EXPECT_LE(relative_rms(o, o_ref), c.tolerance);
      EXPECT_LE(relative_rms(s, s_ref), c.tolerance);
    }
  });
}

}  // namespace attnzoo::testing
