#include "layers/scaled_gated_mlp.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/threads.h"

namespace attnzoo {

ScaledGatedMlp::ScaledGatedMlp(GatedMlp mlp, float gate_multiplier, float down_multiplier)
    : mlp_(std::move(mlp)), gate_mult_(gate_multiplier), down_mult_(down_multiplier) {
  require(std::isfinite(gate_multiplier), "gate_multiplier", "must be finite");
  require(std::isfinite(down_multiplier), "down_multiplier", "must be finite");
}

void ScaledGatedMlp::forward(const float* x, int64_t T, float* out) const {
  const int64_t I = mlp_.intermediate(), H = mlp_.hidden();
  std::vector<float> g(size_t(T * I)), u(size_t(T * I));
  Linear::forward_shared({{&mlp_.gate_proj(), g.data()}, {&mlp_.up_proj(), u.data()}}, x, T);
  ThreadPool::global().parallel_for(T, [&](int64_t t, int) {
    float* gr = g.data() + t * I;
    if (gate_mult_ != 1.f)
      for (int64_t i = 0; i < I; ++i) gr[i] *= gate_mult_;
    gated_activation(mlp_.activation(), gr, u.data() + t * I, gr, I);
  });
  mlp_.down_proj().forward(g.data(), T, out);
  if (down_mult_ != 1.f)
    for (int64_t i = 0; i < T * H; ++i) out[i] *= down_mult_;
}

}  // namespace attnzoo
