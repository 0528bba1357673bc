#include "kernels/linear/retention/retention.h"

#include <cmath>

#include "core/error.h"

namespace attnzoo {
namespace {

// Simple GLA with every value head's fixed decay; `gamma` holds those decays and must outlive the problem.
GlaProblem retention_problem(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                             const GlaOptions& opts, std::vector<float>& gamma) {
  require(v.ndim == 4, "v", "expected [B, T, HV, V], got " + v.shape_str());
  gamma = retention_log_decays(v.shape[2]);
  const TensorView g_gamma = TensorView::contiguous(gamma.data(), DType::f32, {int64_t(gamma.size())});
  return make_gla_problem(q, k, v, TensorView{}, GateKind::scalar, g_gamma, o, opts);
}

void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o, const GlaOptions& opts,
         GlaPath path, const char* entry) {
  std::vector<float> gamma;
  run_gla(retention_problem(q, k, v, o, opts, gamma), path, entry);
}

}  // namespace

std::vector<float> retention_log_decays(int64_t num_heads) {
  std::vector<float> out(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) out[size_t(h)] = float(std::log1p(-std::exp2(-5.0 - double(h))));
  return out;
}

void chunk_retention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                     const GlaOptions& opts) {
  run(q, k, v, o, opts, GlaPath::chunk, "chunk_retention");
}

void recurrent_retention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                         const GlaOptions& opts) {
  run(q, k, v, o, opts, GlaPath::recurrent, "recurrent_retention");
}

void retention_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                         const GlaOptions& opts) {
  run(q, k, v, o, opts, GlaPath::reference, "retention_reference");
}

void parallel_retention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                        const GlaOptions& opts) {
  require(opts.initial_state.empty(), "initial_state", "the parallel form has no state; use chunk_retention");
  require(opts.final_state.empty(), "final_state", "the parallel form has no state; use chunk_retention");
  std::vector<float> gamma;
  const GlaProblem p = retention_problem(q, k, v, o, opts, gamma);
  require_gla_host(p, "parallel_retention");
  gated_linear_parallel_constant_decay(p);
}

}  // namespace attnzoo
