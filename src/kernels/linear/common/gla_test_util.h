#pragma once
// Test harness shared by the gated-linear families: builds random inputs for a shape, runs the reference once
// and the recurrent and chunked kernels on every SIMD target, and compares outputs and final states.
#include <functional>
#include <random>
#include <vector>

#include "kernels/linear/common/gla_problem.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

struct GlaCase {
  int64_t B = 1, T = 1, H = 1, HV = 1, K = 16, V = 16;
  std::vector<int32_t> cu_seqlens;  // packed sequences (B must be 1) when not empty
  bool initial_state = false;
  DType dtype = DType::f32;
  int64_t chunk_size = 64;
  int64_t num_seqs() const { return cu_seqlens.empty() ? B : int64_t(cu_seqlens.size()) - 1; }
};

// A gate tensor with entries uniform in [g_min, g_max] (natural-log decays).
inline HostTensor uniform_tensor(std::vector<int64_t> shape, uint64_t seed, float lo, float hi) {
  HostTensor t(DType::f32, shape, seed, 0.f);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.view.ptr<float>()[i] = dist(rng);
  return t;
}

// The inputs a run sees: q, k, v and the options (initial / final state already wired).
struct GlaRunArgs {
  const TensorView &q, &k, &v, &o;
  const GlaOptions& opts;
};
using GlaRunner = std::function<void(GlaPath, const GlaRunArgs&)>;

// Runs reference, recurrent and chunk; recurrent and chunk must match the reference to `tol` (relative RMS),
// outputs and final states, on every target. Returns the reference output for further checks.
inline void expect_gla_paths_agree(const GlaCase& c, const GlaRunner& run, double tol = 1e-4, uint64_t seed = 1) {
  SCOPED_TRACE("T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) + " HV=" + std::to_string(c.HV) +
               " K=" + std::to_string(c.K) + " V=" + std::to_string(c.V) + " chunk=" + std::to_string(c.chunk_size));
  const int64_t N = c.num_seqs();
  HostTensor q(c.dtype, {c.B, c.T, c.H, c.K}, seed), k(c.dtype, {c.B, c.T, c.H, c.K}, seed + 1),
      v(c.dtype, {c.B, c.T, c.HV, c.V}, seed + 2);
  HostTensor h0(DType::f32, {N, c.HV, c.K, c.V}, seed + 3, c.initial_state ? 1.f : 0.f);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), o(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f);
  HostTensor s_ref(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f), s(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f);
  GlaOptions opts;
  if (c.initial_state) opts.initial_state = h0.view;
  if (!c.cu_seqlens.empty()) {
    opts.cu_seqlens = c.cu_seqlens.data();
    opts.cu_seqlens_len = int64_t(c.cu_seqlens.size());
  }
  opts.chunk_size = c.chunk_size;
  opts.final_state = s_ref.view;
  run(GlaPath::reference, {q.view, k.view, v.view, o_ref.view, opts});
  opts.final_state = s.view;
  for_each_target([&](Target) {
    for (GlaPath path : {GlaPath::recurrent, GlaPath::chunk}) {
      SCOPED_TRACE(path == GlaPath::chunk ? "chunk" : "recurrent");
      std::fill(o.bytes.begin(), o.bytes.end(), 0);
      std::fill(s.bytes.begin(), s.bytes.end(), 0);
      run(path, {q.view, k.view, v.view, o.view, opts});
      EXPECT_LE(relative_rms(o, o_ref), tol);
      EXPECT_LE(relative_rms(s, s_ref), tol);
    }
  });
}

}  // namespace attnzoo::testing
