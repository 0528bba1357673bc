#pragma once
// S4D and DSS: diagonal linear state-space layers with a fixed (input-independent) complex state matrix, in the
// two forms state-spaces' SSMKernelDiag has: the convolution kernel (Vandermonde product, then an FFT
// convolution: prefill over whole sequences) and the recurrence (decode). Per channel h and mode n:
//
//   h_t[n] = dA[h, n] h_{t-1}[n] + dB[h, n] u_t[h]        (complex state, one per mode)
//   y_t[h] = 2 Re(sum_n C[h, n] h_t[n]) + D[h] u_t[h]     (2 Re: each mode stands for a conjugate pair)
//
// equivalently y = K * u + D u with the kernel K[h, l] = 2 Re(sum_n C[h, n] dB[h, n] dA[h, n]^l). The
// discretization of (dt, A, B) with dtA = dt * A:
//   zoh        dA = exp(dtA),                  dB = B (exp(dtA) - 1) / A
//   bilinear   dA = (1 + dtA/2) / (1 - dtA/2), dB = B dt / (1 - dtA/2)
//   dss        dA = exp(dtA),                  dB = B (exp(dtA) - 1) / (A (exp(dtA L) - 1)) / 2
// dss is DSS's softmax form (state-spaces' disc='dss'): the kernel's rows normalized over the length L =
// dss_length, with state-spaces' regularized reciprocal (1 / x as conj(x) / (|x|^2 + 1e-7)); the / 2 undoes the
// 2 Re of the output, since DSS takes the plain real part. DSS's "exp" variant is zoh up to that factor 2.
//
// Layouts: u, out [B, T, H] (float32 / bfloat16 / float16; packed sequences with cu_seqlens and B = 1);
// dt [H] (> 0); A, B, C [H, N, 2]: complex values as (real, imaginary) float pairs, Re(A) < 0; D [H].
// States [N_seq, H, N, 2] f32: the complex state h_T[n] as (real, imaginary) pairs, the state after the
// sequence's last token (initial_state: the state before its first).
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

enum class S4Discretization { zoh, bilinear, dss };

// Parses "zoh" / "bilinear" / "dss"; ArgumentError naming `discretization` otherwise.
S4Discretization s4_discretization(const char* name);

struct S4Params {
  TensorView dt, A, B, C;  // required
  TensorView D;            // optional skip [H]
  S4Discretization discretization = S4Discretization::zoh;
  int64_t dss_length = 0;  // dss: the L its normalization sums over (>= 1); ignored otherwise
};

struct S4Args {
  S4Params params;
  TensorView u;  // [B, T, H]
  const int32_t* cu_seqlens = nullptr;
  int64_t cu_seqlens_len = 0;
  TensorView initial_state;  // optional [N_seq, H, N, 2] f32
  TensorView final_state;    // optional [N_seq, H, N, 2] f32, written
  // What errors call the two states: a decode step's one in-place state goes through these checks as both.
  const char* initial_state_name = "initial_state";
  const char* final_state_name = "final_state";
  TensorView out;            // [B, T, H], written
};

// Convolution form: K by the Vandermonde product, then y = K * u by FFT (sequences of more than
// s4_direct_max tokens) or directly (shorter ones); the initial state's contribution and the final state are
// Vandermonde products too.
void s4_conv(const S4Args& args);
// Recurrent form: the state carried token by token.
void s4_recurrent(const S4Args& args);
// The recurrence written out plainly in double precision.
void s4_reference(const S4Args& args);
// Sequences up to this many tokens take the direct convolution in s4_conv.
inline constexpr int64_t s4_direct_max = 128;

// The kernel K [H, L] (f32, written) alone: the Vandermonde product, or its double-precision definition.
void s4_kernel(const S4Params& params, const TensorView& K);
void s4_kernel_reference(const S4Params& params, const TensorView& K);

// One decode step for a batch, the state updated in place: state [Bn, H, N, 2] f32; u, y [Bn, H].
struct S4StepArgs {
  S4Params params;
  TensorView state, u, y;
};
void s4_step(const S4StepArgs& args);
void s4_step_reference(const S4StepArgs& args);

}  // namespace attnzoo
