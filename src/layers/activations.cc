#include "layers/activations.h"

#include <cmath>

#include "core/error.h"

namespace attnzoo {

Activation parse_activation(const std::string& name) {
  if (name == "silu" || name == "swish") return Activation::silu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") return Activation::gelu_tanh;
  if (name == "gelu") return Activation::gelu;
  if (name == "relu2") return Activation::relu2;
  throw ArgumentError("hidden_act: unsupported activation '" + name +
                      "' (supported: silu, gelu, gelu_pytorch_tanh, relu2)");
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::silu: return "silu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::relu2: return "relu2";
    default: return "gelu";
  }
}

float activation_reference(Activation a, float x) {
  switch (a) {
    case Activation::silu: return x / (1.f + std::exp(-x));
    case Activation::gelu_tanh: {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case Activation::relu2: return x > 0.f ? x * x : 0.f;
    default: return 0.5f * x * (1.f + std::erf(x * 0.7071067811865476f));
  }
}

}  // namespace attnzoo
