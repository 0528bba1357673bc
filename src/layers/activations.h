#pragma once
// Element-wise activations of the MLP blocks, f32 in place or out of place.
#include <cstdint>
#include <string>

namespace attnzoo {

enum class Activation { silu, gelu_tanh, gelu, relu2 };

// Hugging Face hidden_act names: silu/swish, gelu_pytorch_tanh/gelu_new/gelu_fast (tanh form), gelu (erf form),
// relu2 (squared ReLU).
Activation parse_activation(const std::string& name);
const char* activation_name(Activation a);

// The plain definitions, one element at a time with libm (the reference the vector kernels are tested against):
//   silu(x) = x / (1 + e^-x)
//   gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   gelu(x) = x/2 (1 + erf(x / sqrt(2)))
//   relu2(x) = max(x, 0)^2
float activation_reference(Activation a, float x);
inline float apply_activation(Activation a, float x) { return activation_reference(a, x); }

// Vectorised (Highway, dispatched per CPU target); within 2e-6 relative / 1e-6 absolute of the reference.
// x[i] = act(x[i]), n elements.
void apply_activation_inplace(Activation a, float* x, int64_t n);
// out[i] = act(gate[i]) * up[i] (SwiGLU / GeGLU), n elements. out may be gate or up (in place).
void gated_activation(Activation a, const float* gate, const float* up, float* out, int64_t n);

}  // namespace attnzoo
