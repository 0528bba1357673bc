#pragma once
// The gated delta family's per-token gates on an NVIDIA GPU, the GPU runner's twin of the CPU mixers' loops:
// beta = sigmoid(b) and the log decay g = -exp(A_log) * softplus(a + dt_bias), softplus(x) = x above 20.
// Gated DeltaNet (layers/gated_deltanet_mixer.h): one decay per value head (a, g [T, HV], A per head). KDA
// (layers/kda_mixer.h): one per head and key channel (a, g [T, H*K], dt_bias [H*K], A per head: each A serves
// `group` = K consecutive columns). f32 throughout; no CUDA headers here.
#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

// b [T, Nb], a [T, Ng] f32 with a unit last stride and any row stride (slices of projection rows); neg_A
// (-exp(A_log)) f32 [Ng / group] and dt_bias f32 [Ng] contiguous, group = Ng / neg_A's length; g [T, Ng] and beta
// [T, Nb] f32 contiguous, written. One CUDA device. ArgumentError / DTypeError naming the argument.
struct DeltaGates {
  TensorView b, a, neg_A, dt_bias, g, beta;
};
void check_delta_gates_cuda(const DeltaGates& x);
// The launcher (delta_gates.cu, CUDA builds only) checks first, then runs on the tensors' device.
void delta_gates_cuda(const DeltaGates& x, Stream stream = current_stream());

}  // namespace attnzoo
