#pragma once
// Random SwiGLU experts for the MoE layers' tests: E experts of hidden H and width I (gate / up f32, down bf16, as
// checkpoints often mix them) and one shared expert of width S, each tensor from its own fixed seed.
#include <cstdint>
#include <vector>

#include "layers/mlp.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

struct RandomGatedExperts {
  int64_t H, I, E, S;
  std::vector<HostTensor> gate, up, down;
  HostTensor sg, su, sd;  // the shared expert's gate, up and down

  RandomGatedExperts(int64_t hidden, int64_t width, int64_t experts, int64_t shared_width)
      : H(hidden), I(width), E(experts), S(shared_width), sg(DType::f32, {S, H}, 90, 0.3f),
        su(DType::f32, {S, H}, 91, 0.3f), sd(DType::f32, {H, S}, 92, 0.3f) {
    for (int64_t e = 0; e < E; ++e) {
      gate.emplace_back(DType::f32, std::vector<int64_t>{I, H}, 10 + e, 0.3f);
      up.emplace_back(DType::f32, std::vector<int64_t>{I, H}, 30 + e, 0.3f);
      down.emplace_back(DType::bf16, std::vector<int64_t>{H, I}, 50 + e, 0.3f);
    }
  }
  static GatedMlp mlp(const HostTensor& g, const HostTensor& u, const HostTensor& d) {
    return GatedMlp(Linear::from_weights(g.view, {}, "g"), Linear::from_weights(u.view, {}, "u"),
                    Linear::from_weights(d.view, {}, "d"), Activation::silu, "mlp");
  }
  GatedMlp expert(int64_t e) const { return mlp(gate[size_t(e)], up[size_t(e)], down[size_t(e)]); }
  std::vector<GatedMlp> experts() const {
    std::vector<GatedMlp> v;
    for (int64_t e = 0; e < E; ++e) v.push_back(expert(e));
    return v;
  }
  GatedMlp shared_expert() const { return mlp(sg, su, sd); }
};

}  // namespace attnzoo::testing
