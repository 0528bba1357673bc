#pragma once
// Per-target pieces of quant_gemv (gemv_kernels.cc); call active_target() once before using them.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/quant/quant.h"

namespace attnzoo {

// Activation rows quantized once per call, llama.cpp's Q8 style: blocks of 32 with an f32 scale d = amax / 127
// and values round(x / d) in [-127, 127], held as int16 (the width the pair products take), plus d times the sum
// of each 16 and each 32 values (formats with a per-sub-block offset m: sum_k (s q_k + m) x_k = s q.x + m sum x).
// A call fills only what its rows read (quantize_rows in gemv.cc; a shared call the union over its matrices' routes):
// the portable rows (gemv_kernels.cc) q, d, dsum16, dsum32; the VNNI and AVX2 rows over GGUF blocks xs8, dx8, the
// lane sums, d, dsum16, dsum32; the regrouped rows (gemv_groups_*.cc) xs8, d, dsum32, xsum16. The others are null
// (xsum16 is always written, with the sums).
struct QuantActivations {
  const int16_t* q;      // [T, K]: the portable rows only (null on the VNNI and AVX2 routes)
  // For the VNNI and AVX2 rows only (null otherwise): rows of K64 = K rounded up to 64, padded with zeros; "lane" = the 4
  // values one i32 lane of vpdpbusd sums. dx8 and the lane sums only where a matrix of the call has GGUF rows.
  const int8_t* xs8;          // [T, K64]: q
  const float* dx8;           // [T, K64 / 4]: d of each lane's block
  const int32_t* xsum4_neg8;  // [T, K64 / 4]: -8 * sum of each lane's 4 q (Q4_0's offset, exact in integers)
  const int32_t* xsum4_neg128;  // [T, K64 / 4]: -128 * the same (Q8_0's weights are dotted as w + 128)
  const float* dxsum4;        // [T, K64 / 4]: d * the same (Q4_1's minimum)
  const float* d;        // [T, K / 32]
  const float* dsum16;   // [T, K / 16]
  const float* dsum32;   // [T, K / 32]
  const int32_t* xsum16;  // [T, K / 16]: the sum of each 16 q (the regrouped rows' offsets, row_groups.h)
  // Row stride of xs8 (the lane arrays: ld8 / 4), K64 where quant_gemv quantizes; every row kernel indexes by it,
  // never by K (which equals it only for K a multiple of 64).
  size_t ld8;
};

struct QuantGemvTask {
  QuantMatrix w;
  const float* x;  // [T, K] f32 (the f32 path)
  const float* xsum16;  // [T, K / 16]: sums of each 16 values of x (the f32 path, block formats)
  QuantActivations act;  // the integer path
  size_t T;        // 1..8
  size_t n0, n1;   // output rows of this task
  const float* bias;
  float* y;  // [T, ldy]
  size_t ldy;
};

// The loop the f32 row kernels share: rows [n0, n1) of the task, tokens in groups of up to 4;
// dot(n, t0, tokens, out) writes out[0, tokens) for row n and tokens [t0, t0 + tokens), the bias is added here.
template <class Dot>
inline void for_rows_by_4_tokens(const QuantGemvTask& g, Dot dot) {
  for (size_t n = g.n0; n < g.n1; ++n)
    for (size_t t0 = 0; t0 < g.T; t0 += 4) {
      const size_t tokens = g.T - t0 < 4 ? g.T - t0 : 4;
      float out[4];
      dot(n, t0, tokens, out);
      for (size_t t = 0; t < tokens; ++t) g.y[(t0 + t) * g.ldy + n] = out[t] + (g.bias ? g.bias[n] : 0.f);
    }
}

// The token loop of the AVX2 and VNNI rows: tokens in groups of up to 4, row(kT, t0, out + t0) with kT a
// std::integral_constant, so that a group's weights are unpacked once and its accumulators stay in registers.
template <class Row>
inline void by_4_tokens(size_t T, float* out, Row row) {
  for (size_t t0 = 0; t0 < T; t0 += 4) {
    switch (T - t0 < 4 ? T - t0 : 4) {
      case 1: row(std::integral_constant<size_t, 1>(), t0, out + t0); break;
      case 2: row(std::integral_constant<size_t, 2>(), t0, out + t0); break;
      case 3: row(std::integral_constant<size_t, 3>(), t0, out + t0); break;
      default: row(std::integral_constant<size_t, 4>(), t0, out + t0); break;
    }
  }
}

// Where quantize_activations writes (the arrays of QuantActivations).
struct QuantActivationsOut {
  int16_t* q;  // null: not written
  float *d, *dsum16, *dsum32;
  int32_t* xsum16;
  int8_t* xs8;  // null: none of the VNNI arrays below are written
  float* dx8;   // null: not written (nor the lane sums)
  int32_t *xsum4_neg8, *xsum4_neg128;
  float* dxsum4;
  size_t ld8;  // row stride of xs8 (K rounded up to 64; the lane arrays: ld8 / 4)
};
// The rows of x [T, K] (K a multiple of 32), rounded to nearest (ties to even). Of the VNNI arrays it writes xs8
// and dx8 (those not null); quant_vnni_lane_sums then derives the lane sums from them.
void quantize_activations(const float* x, size_t T, size_t K, const QuantActivationsOut& out);
void quant_vnni_lane_sums(size_t T, const QuantActivationsOut& out);
void quant_gemv_rows_int8(const QuantGemvTask& task);
// True when the CPU has AVX-512 VNNI and the active target is an AVX-512 one.
bool quant_gemv_vnni_enabled();
// The rows on AVX-512 VNNI (gemv_avx512vnni.cc) for Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, IQ4_NL and IQ4_XS, and Q5_K
// regrouped (its GGUF rows go to quant_gemv_rows_avx2, which reads the same arrays) (quant_gemv_vnni_handles); false
// (nothing written) for other formats.
bool quant_gemv_rows_vnni(const QuantGemvTask& task);
bool quant_gemv_vnni_handles(QuantType type);
// The same rows with AVX2 (gemv_avx2.cc) for those formats and the Q5 ones, taken where the VNNI rows are not:
// enabled when any AVX2 or AVX-512 target is active. They read the same arrays; quant_avx2_lane_sums fills the
// lane sums.
bool quant_gemv_avx2_enabled();
bool quant_gemv_avx2_handles(QuantType type);  // the VNNI formats and Q5_0, Q5_1, Q5_K
void quant_avx2_lane_sums(size_t T, const QuantActivationsOut& out);
bool quant_gemv_rows_avx2(const QuantGemvTask& task);
// The regrouped rows (row_groups.h) on AVX-512 VNNI and on AVX2 (gemv_groups_avx2.cc): tasks of whole groups of
// 16 rows.
void quant_gemv_groups_vnni(const QuantGemvTask& task);
void quant_gemv_groups_avx2(const QuantGemvTask& task);
// The AVX2 regrouped rows form their lane sums with AVX-VNNI's vpdpbusd (core/avx_vnni.h: the CPU has it and
// ATTNZOO_AVX_VNNI is not 0), the same bits; the tasks they ran so, in this process (what tests observe).
// quant_gemv_groups_allow_avx_vnni(false) keeps them on vpmaddubsw in this process (tests compare both), true
// gives the rule back; quant_gemv_groups_avx_vnni_allowed() is what was last set (true at start), for scopes
// that give it back (avx2_group_rows_scope.h).
bool quant_gemv_groups_avx_vnni_enabled();
uint64_t quant_gemv_groups_avx_vnni_tasks();
void quant_gemv_groups_allow_avx_vnni(bool allow);
bool quant_gemv_groups_avx_vnni_allowed();
// The f32 path (gemv_f32.cc): blocks decoded in registers, FMAs with the f32 activations.
void quant_gemv_rows_f32(const QuantGemvTask& task);
// The f32 rows written with AVX-512 intrinsics (gemv_f32_avx512.cc) for Q4_K and Q6_K (T <= 2), which
// quant_gemv_rows_f32 takes when an AVX-512 target is active; false (nothing written) for other formats.
bool quant_gemv_rows_f32_avx512(const QuantGemvTask& task);
bool quant_gemv_f32_avx512_enabled();
// The Highway rows alone (what quant_gemv_rows_f32 runs for the other formats and targets).
void quant_gemv_rows_f32_portable(const QuantGemvTask& task);
// xsum16[t, i] = sum of x[t, 16 i ... 16 i + 15] (K a multiple of 16).
void activation_sums16(const float* x, size_t T, size_t K, float* xsum16);

}  // namespace attnzoo
