#pragma once
// The FFT sizes and twiddle factors of the S4 convolution (the transforms themselves are per target, fft-inl.h).
#include <cstddef>
#include <cstdint>

namespace attnzoo::s4fft {

// The power of two the linear convolution of two length-`len` sequences fits in without wrapping (>= 2 len).
size_t size_for(int64_t len);

// exp(-2 pi i k / n) for k < n / 2: real parts at [0, n/2), imaginary at [n/2, n). Computed once per size in
// double and rounded (so every twiddle carries one rounding, not a recurrence's drift); shared by all threads,
// never freed.
const float* twiddles(size_t n);

// k with its `bits` low bits reversed: the position of frequency k in a decimation-in-frequency output.
inline size_t bit_reverse(size_t k, int bits) {
  size_t r = 0;
  for (int b = 0; b < bits; ++b, k >>= 1) r = (r << 1) | (k & 1);
  return r;
}

}  // namespace attnzoo::s4fft
