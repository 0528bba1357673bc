#pragma once
// Addressing and loading of one (token, head) row of a GlaProblem's tensors, shared by its kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/convert.h"
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

inline const char* gla_element(const void* base, DType t, int64_t index) {
  return static_cast<const char*>(base) + index * int64_t(dtype_size(t));
}

inline float apply_feature_map(FeatureMap f, float x) {
  switch (f) {
    case FeatureMap::elu_plus_one: return x > 0.f ? x + 1.f : std::exp(x);
    case FeatureMap::relu: return std::max(x, 0.f);
    default: return x;
  }
}

// phi(q) * scale for token row `row` (index into the flattened [B*T] tokens) and key head h.
inline void load_gla_query(const GlaProblem& p, int64_t row, int64_t h, float* dst) {
  convert_to_f32(gla_element(p.q, p.q_dtype, (row * p.H + h) * p.K), p.q_dtype, dst, size_t(p.K));
  for (int64_t i = 0; i < p.K; ++i) dst[i] = apply_feature_map(p.feature_map, dst[i]) * p.scale;
}

inline void load_gla_key(const GlaProblem& p, int64_t row, int64_t h, float* dst) {
  convert_to_f32(gla_element(p.k, p.k_dtype, (row * p.H + h) * p.K), p.k_dtype, dst, size_t(p.K));
  if (p.feature_map != FeatureMap::identity)
    for (int64_t i = 0; i < p.K; ++i) dst[i] = apply_feature_map(p.feature_map, dst[i]);
}

// v row into dst[0, V); with the normaliser a 1 in column V makes the state's column V the key sum z.
inline void load_gla_value(const GlaProblem& p, int64_t row, int64_t hv, float* dst, int64_t padded) {
  convert_to_f32(gla_element(p.v, p.v_dtype, (row * p.HV + hv) * p.V), p.v_dtype, dst, size_t(p.V));
  std::fill(dst + p.V, dst + padded, 0.f);
  if (p.normalize) dst[p.V] = 1.f;
}

// The scalar log decay of one step (data-dependent gate plus the constant one).
inline float gla_scalar_gate(const GlaProblem& p, int64_t row, int64_t hv) {
  float g = p.g_gamma ? p.g_gamma[hv] : 0.f;
  if (p.g) g += load_as_f32(p.g, p.g_dtype, row * p.HV + hv);
  return g;
}

// The per-channel log decay of one step into dst[0, K).
inline void load_gla_channel_gate(const GlaProblem& p, int64_t row, int64_t hv, float* dst) {
  convert_to_f32(gla_element(p.g, p.g_dtype, (row * p.HV + hv) * p.K), p.g_dtype, dst, size_t(p.K));
}

// Padded state width: V columns, one more for the normaliser, rounded up to a whole number of 16-float vectors.
inline int64_t gla_padded_width(const GlaProblem& p) { return (p.V + (p.normalize ? 1 : 0) + 15) / 16 * 16; }

// Copies the initial state (and z into column V) into a [K, Vp] working state, or zeros it.
inline void load_gla_state(const GlaProblem& p, int64_t n, int64_t hv, float* S, int64_t Vp) {
  const int64_t h = hv / p.group();
  for (int64_t i = 0; i < p.K; ++i) {
    float* row = S + i * Vp;
    std::fill(row, row + Vp, 0.f);
    if (p.initial_state) std::copy_n(p.initial_state + ((n * p.HV + hv) * p.K + i) * p.V, p.V, row);
    if (p.normalize && p.initial_z) row[p.V] = p.initial_z[(n * p.H + h) * p.K + i];
  }
}

inline void store_gla_state(const GlaProblem& p, int64_t n, int64_t hv, const float* S, int64_t Vp) {
  const int64_t h = hv / p.group();
  for (int64_t i = 0; i < p.K; ++i) {
    if (p.final_state) std::copy_n(S + i * Vp, p.V, p.final_state + ((n * p.HV + hv) * p.K + i) * p.V);
    // Every value head of a group carries the same z; the first one writes it.
    if (p.normalize && p.final_z && hv % p.group() == 0) p.final_z[(n * p.H + h) * p.K + i] = S[i * Vp + p.V];
  }
}

// Writes one output row from the [Vp] accumulator, dividing by the normaliser when there is one.
inline void store_gla_output(const GlaProblem& p, int64_t row, int64_t hv, float* acc) {
  if (p.normalize) {
    const float inv = 1.f / (acc[p.V] + 1e-10f);
    for (int64_t j = 0; j < p.V; ++j) acc[j] *= inv;
  }
  convert_from_f32(acc, const_cast<char*>(gla_element(p.o, p.o_dtype, (row * p.HV + hv) * p.V)), p.o_dtype,
                   size_t(p.V));
}

}  // namespace attnzoo
