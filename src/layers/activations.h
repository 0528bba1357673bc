#pragma once
// Element-wise activations of the MLP blocks, f32 in place or out of place.
#include <cstdint>
#include <string>

namespace attnzoo {

enum class Activation { silu, gelu_tanh, gelu };

// Hugging Face hidden_act names: silu/swish, gelu_pytorch_tanh/gelu_new/gelu_fast (tanh form), gelu (erf form).
Activation parse_activation(const std::string& name);
const char* activation_name(Activation a);

float apply_activation(Activation a, float x);
// out[i] = act(gate[i]) * up[i] (SwiGLU / GeGLU), n elements.
void gated_activation(Activation a, const float* gate, const float* up, float* out, int64_t n);

}  // namespace attnzoo
