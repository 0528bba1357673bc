#include "kernels/linear/simple_gla/simple_gla.h"

namespace attnzoo {
namespace {

void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
         const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts, GlaPath path, const char* entry) {
  run_gla(make_gla_problem(q, k, v, g, GateKind::scalar, g_gamma, o, opts), path, entry);
}

}  // namespace

void chunk_simple_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                      const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts) {
  run(q, k, v, g, g_gamma, o, opts, GlaPath::chunk, "chunk_simple_gla");
}

void recurrent_simple_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                          const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts) {
  run(q, k, v, g, g_gamma, o, opts, GlaPath::recurrent, "recurrent_simple_gla");
}

void simple_gla_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                          const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts) {
  run(q, k, v, g, g_gamma, o, opts, GlaPath::reference, "simple_gla_reference");
}

}  // namespace attnzoo
