#include "kernels/linear/linear_attention/linear_attention.h"

#include "core/error.h"

namespace attnzoo {
namespace {

void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
         const LinearAttentionOptions& opts, GlaPath path, const char* entry) {
  GlaProblem p = make_gla_problem(q, k, v, TensorView{}, GateKind::none, TensorView{}, o, opts);
  p.feature_map = opts.feature_map;
  if (opts.normalize) {
    set_gla_normalizer(p, opts.initial_z, opts.final_z);
  } else {
    require(opts.initial_z.empty(), "initial_z", "only used with normalize");
    require(opts.final_z.empty(), "final_z", "only used with normalize");
  }
  run_gla(p, path, entry);
}

}  // namespace

void chunk_linear_attn(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                       const LinearAttentionOptions& opts) {
  run(q, k, v, o, opts, GlaPath::chunk, "chunk_linear_attn");
}

void recurrent_linear_attn(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                           const LinearAttentionOptions& opts) {
  run(q, k, v, o, opts, GlaPath::recurrent, "recurrent_linear_attn");
}

void linear_attn_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                           const LinearAttentionOptions& opts) {
  run(q, k, v, o, opts, GlaPath::reference, "linear_attn_reference");
}

}  // namespace attnzoo
