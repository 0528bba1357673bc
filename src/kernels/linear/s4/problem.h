#pragma once
// A validated S4D / DSS call, shared by every form: the discretized parameters (in double: the kernel and the
// recurrence both raise dA to powers of up to the sequence length, where f32 parameters would drift), the
// sequence spans and the raw input / output pointers.
#include <complex>
#include <vector>

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/s4/s4.h"

namespace attnzoo {

using cdouble = std::complex<double>;

// a * b without std::complex's operator*, which (without -ffast-math) calls __muldc3 to sort out infinities and
// NaNs: ten times the arithmetic, on the kernel's per-tile power updates. Our values are always finite.
inline cdouble cmul(cdouble a, cdouble b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
inline cdouble cdiv(cdouble a, cdouble b) { return cmul(a, std::conj(b)) / std::norm(b); }
inline cdouble cexp(cdouble a) { return std::exp(a.real()) * cdouble(std::cos(a.imag()), std::sin(a.imag())); }

struct S4Discrete {
  int64_t H = 0, N = 0;
  std::vector<cdouble> dA, dB, C;  // [H, N]
  std::vector<cdouble> log_dA;     // [H, N]: dA^l = exp(l log_dA), exact powers at any l
  std::vector<float> skip;         // [H] or empty
  size_t at(int64_t h, int64_t n) const { return size_t(h * N + n); }
};

// Validates dt, A, B, C, D (naming the argument) and discretizes them.
S4Discrete make_s4_discrete(const S4Params& p);

struct S4Problem {
  S4Discrete ssm;
  int64_t batch = 0, T = 0;
  SequenceSpans seqs;  // begin: the row of the sequence's first token in the flattened [B * T] tokens
  const void* u = nullptr;
  DType u_dtype{};
  void* out = nullptr;
  DType out_dtype{};
  const float* h0 = nullptr;  // [N_seq, H, N, 2]
  float* ht = nullptr;
  int64_t max_length() const;
};

S4Problem make_s4_problem(const S4Args& a);
// The step as a scan of length 1 whose initial and final states are both `state`.
S4Problem make_s4_step_problem(const S4StepArgs& a);
// K [H, L] f32 checked against the parameters; returns L.
int64_t check_s4_kernel_out(const S4Discrete& ssm, const TensorView& K);

}  // namespace attnzoo
