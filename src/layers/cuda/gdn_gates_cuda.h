#pragma once
// Gated DeltaNet's per-token gates on an NVIDIA GPU, the GPU runner's twin of GatedDeltaNetMixer's loop
// (layers/gated_deltanet_mixer.h): beta = sigmoid(b) and the log decay g = -exp(A_log) * softplus(a + dt_bias),
// per value head and token, softplus(x) = x above 20. f32 throughout; no CUDA headers here.
#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

// b, a f32 [T, HV] with a unit last stride and any row stride (slices of the projection's rows); neg_A (-exp(A_log))
// and dt_bias f32 [HV] contiguous; g and beta f32 [T, HV] contiguous, written. One CUDA device. ArgumentError /
// DTypeError naming the argument.
struct GdnGates {
  TensorView b, a, neg_A, dt_bias, g, beta;
};
void check_gdn_gates_cuda(const GdnGates& x);
// The launcher (gdn_gates.cu, CUDA builds only) checks first, then runs on the tensors' device.
void gdn_gates_cuda(const GdnGates& x, Stream stream = current_stream());

}  // namespace attnzoo
