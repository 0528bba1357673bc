#pragma once
// Weight quantization into llama.cpp's GGUF block formats (the inverse direction of quant.h).
//
//  - Round-to-nearest formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and the plain ones (F32, F16, BF16) give the same
//    bytes as gguf-py's numpy quantizers (gguf.quants.quantize): the same f32 operations in the same order,
//    numpy's rounding of f16 scales (nearest even), subnormals kept (quantize_matrix runs its rows unflushed).
//  - K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) search each sub-block's scale (and minimum) the way llama.cpp's reference
//    quantizers do: candidate scales around the plain max / range one, each refitted by weighted least squares,
//    the one with the smallest weighted error kept; then the sub-block scales are themselves quantized to 6 / 8
//    bits and the values requantized against the stored scales. Every search forms its products in llama.cpp's
//    order, so Q2_K ... Q6_K, IQ4 and the importance-weighted 4/5-bit formats give llama-quantize's bytes exactly,
//    with and without importance (python/tests/test_quantize_q2_q3_k.py runs llama-quantize where it is built).
//  - IQ4_NL / IQ4_XS (quantize_iq4.cc) search each block's scale over the non-linear grid as llama.cpp's
//    quantize_row_iq4_nl_impl does (candidates putting the largest |x| on the grid's ends, each refitted by
//    weighted least squares); IQ4_XS then rounds the eight block scales to 6 bits of one f16 scale.
//  - `importance` (llama.cpp's imatrix: per input channel, e.g. the mean squared activation) weights that error
//    instead of the default |x|-based weights, for Q4_0 / Q4_1 / Q5_0 / Q5_1, the K-quants and IQ4 (Q8_0 and the
//    plain types ignore it). With importance the 4/5-bit round-to-nearest formats search their scale too, so
//    they no longer match gguf-py byte for byte (that match is for importance = nullptr only).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/quant_type.h"

namespace attnzoo {

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
bool quantize_supported(QuantType t);

// n values (a whole number of t's blocks, finite) to their blocks at dst (quant_row_bytes(t, n) bytes).
// importance: n weights >= 0 or nullptr. Runs with the calling thread's floating-point environment.
void quantize_row(QuantType t, const float* x, void* dst, int64_t n, const float* importance = nullptr);

// A [rows, cols] row-major matrix to rows * quant_row_bytes(t, cols) bytes, rows over the thread pool with
// subnormals kept. importance: cols weights (one per input channel, shared by every row) or nullptr.
// ArgumentError naming `name` for an unsupported type, cols not a whole number of blocks, a non-finite value
// (with its row and column) or a negative / non-finite importance.
std::vector<uint8_t> quantize_matrix(QuantType t, const float* x, int64_t rows, int64_t cols,
                                     const float* importance, const std::string& name);

// ArgumentError "<what>: input channel i is v (expected finite and >= 0)" unless every one of the cols weights is.
void require_importance(const float* importance, int64_t cols, const std::string& what);

// IEEE half / bfloat16 from f32, rounding to nearest even as numpy's astype(float16) and gguf-py's BF16 do.
uint16_t f32_to_half(float f);
uint16_t f32_to_bf16(float f);
// A block's f16 scale field: v as f32_to_half, stored little-endian at p (any alignment).
inline void store_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_half(v);
  std::memcpy(p, &h, 2);
}

namespace quant_detail {
// Per-format row quantizers (quantize_reference.cc: the round-to-nearest formats; quantize_k.cc: K-quants).
void quantize_q8_0(const float* x, uint8_t* y, int64_t n);
void quantize_q4_0(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q4_1(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q5_0(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q5_1(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q4_k(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q5_k(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q6_k(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q2_k(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_q3_k(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_iq4_nl(const float* x, uint8_t* y, int64_t n, const float* w);
void quantize_iq4_xs(const float* x, uint8_t* y, int64_t n, const float* w);
// The same IQ4 search in double with a plain nearest-value scan (quantize_iq4_reference.cc), for the tests.
void quantize_iq4_reference(QuantType t, const float* x, uint8_t* y, int64_t n, const float* w);
// IQ4 packing both share: codes j and j + 16 of each 32 into byte j; IQ4_XS's 6-bit scales into bytes 2-7.
void pack_iq4_codes(const uint8_t* L, int n, uint8_t* qs);
void pack_iq4_xs_scales(const uint8_t* ls, uint8_t* block);

// The scale searches the weighted 4/5-bit formats and the K-quants share (quantize_search.cc).
// Symmetric: levels L[i] in [0, 2 nmax) standing for L - nmax, scale returned (x ~ scale * (L - nmax)).
float search_symmetric(int n, int nmax, const float* x, const float* w, int8_t* L);
// With a minimum: levels in [0, nmax], x ~ scale * L - *neg_min; rmin / rdelta / nstep: the candidate grid
// (nmax + rmin + rdelta * k for k = 0..nstep) over the range; candidates compared by the weighted squared error,
// or by the weighted absolute error (absolute_error: Q2_K's plain search, make_qkx2_quants' use_mad).
float search_with_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                      float rdelta, int nstep, bool absolute_error = false);
// Non-negative values (sub-block scales) to levels in [0, nmax] with a weighted refit; the scale returned.
float search_positive(int n, int nmax, const float* x, const float* w, uint8_t* L);
// Symmetric levels as search_symmetric (L - nmax in [-nmax, nmax)), weights x^2, refined one level at a time
// instead of over a grid of scales (make_q3_quants: Q3_K's plain search); the least-squares scale returned.
float search_symmetric_refined(int n, int nmax, const float* x, int8_t* L);
// Round half to even, as llama.cpp's nearest_int: adding 1.5 * 2^23 leaves the rounded integer in the low
// mantissa bits (exact for |v| < 2^22). Larger finite magnitudes (only from a near-zero scale; every caller clamps
// the level) saturate at +-2^30 instead of an undefined conversion. A NaN gives 0 and an infinity of either sign
// -2^22, as the trick does in llama.cpp (an inverse scale that overflowed f32, on f32-subnormal blocks).
inline int nearest_int(float v) {
  if (std::isinf(v)) return -(1 << 22);
  if (!(std::fabs(v) <= 4194303.f)) return v > 0 ? (1 << 30) : v < 0 ? -(1 << 30) : 0;
  const float shifted = v + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007FFFFF) - 0x00400000;
}
}  // namespace quant_detail

}  // namespace attnzoo
