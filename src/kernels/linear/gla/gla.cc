#include "kernels/linear/gla/gla.h"

#include "core/error.h"

namespace attnzoo {
namespace {

void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g, const TensorView& o,
         const GlaOptions& opts, GlaPath path, const char* entry) {
  require(!g.empty(), "g", "GLA needs a gate [B, T, HV, K]");
  run_gla(make_gla_problem(q, k, v, g, GateKind::channel, TensorView{}, o, opts), path, entry);
}

}  // namespace

void chunk_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
               const TensorView& o, const GlaOptions& opts) {
  run(q, k, v, g, o, opts, GlaPath::chunk, "chunk_gla");
}

void recurrent_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                   const TensorView& o, const GlaOptions& opts) {
  run(q, k, v, g, o, opts, GlaPath::recurrent, "recurrent_gla");
}

void gla_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                   const TensorView& o, const GlaOptions& opts) {
  run(q, k, v, g, o, opts, GlaPath::reference, "gla_reference");
}

}  // namespace attnzoo
