// A NaN or Inf in a value row must reach exactly the query rows that see its key. The prefill tile products
// multiply every (row, key) pair of a tile, a hidden key with weight 0, and 0 * NaN is NaN: in a partly visible
// tile that would carry the value into rows that cannot see it, and so make the result depend on the tiling. So
// the kernel checks a partly visible tile's value rows (in cache already, against the tile's products a cost
// below a percent, and most tiles are wholly visible) and, only when one is not finite, multiplies the visible
// pairs alone (MaskedValueProduct). Per-target header: include it after hwy/foreach_target.h.
#if defined(ATTNZOO_PREFILL_HIDDEN_VALUES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_PREFILL_HIDDEN_VALUES_INL_H_
#undef ATTNZOO_PREFILL_HIDDEN_VALUES_INL_H_
#else
#define ATTNZOO_PREFILL_HIDDEN_VALUES_INL_H_
#endif

#include <cstdint>

#include <hwy/highway.h>

#include "core/dtype.h"
#include "kernels/softmax/options.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether the first n floats (a multiple of the vector length) of each of `rows` rows, ld apart, are finite.
HWY_INLINE bool RowsFinite(const float* HWY_RESTRICT x, size_t rows, size_t n, size_t ld) {
  const hn::ScalableTag<float> d;
  auto poison = hn::Zero(d);  // x - x is 0, or NaN where x is NaN or Inf
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < n; c += hn::Lanes(d)) {
      const auto v = hn::LoadU(d, x + r * ld + c);
      poison = hn::Add(poison, hn::Sub(v, v));
    }
  return hn::AllFalse(d, hn::IsNaN(poison));
}

// The same for a bf16 value tile stored as n pairs (an exponent of all ones is Inf or NaN); 2n is a multiple of
// the vector length.
HWY_INLINE bool PairsFinite(const uint32_t* HWY_RESTRICT pairs, size_t n) {
  const hn::ScalableTag<uint16_t> d;
  const uint16_t* x = reinterpret_cast<const uint16_t*>(pairs);
  const auto exponent = hn::Set(d, uint16_t(0x7f80));
  auto found = hn::Zero(d);
  for (size_t i = 0; i < 2 * n; i += hn::Lanes(d))
    found = hn::Or(found, hn::VecFromMask(d, hn::Eq(hn::And(hn::LoadU(d, x + i), exponent), exponent)));
  return hn::AllTrue(d, hn::Eq(found, hn::Zero(d)));
}

// A bf16 value tile ((keys / 2) x n pairs along keys, key 2i in the low half) as f32 rows of n.
HWY_INLINE void UnpackValuePairs(const uint32_t* HWY_RESTRICT pairs, size_t keys, size_t n, float* HWY_RESTRICT v) {
  for (size_t i = 0; i < keys / 2; ++i)
    for (size_t c = 0; c < n; ++c) {
      const uint32_t pair = pairs[i * n + c];
      v[2 * i * n + c] = bf16_to_f32(uint16_t(pair));
      v[(2 * i + 1) * n + c] = bf16_to_f32(uint16_t(pair >> 16));
    }
}

// o[i] += p[i][j] * v[j] over the tile's keys j (key positions k0 + j) that query row i (position q_first + i)
// sees. v rows are ldv apart, n columns (a multiple of the vector length); o rows are aligned.
HWY_INLINE void MaskedValueProduct(size_t rows, size_t cols, const float* HWY_RESTRICT p, size_t ldp,
                                   const float* HWY_RESTRICT v, size_t ldv, size_t n, const MaskGeometry& mask,
                                   int64_t q_first, int64_t k0, float* HWY_RESTRICT o, size_t ldo) {
  const hn::ScalableTag<float> d;
  for (size_t i = 0; i < rows; ++i) {
    float* orow = o + i * ldo;
    for (size_t j = 0; j < cols; ++j) {
      if (!mask.visible(q_first + int64_t(i), k0 + int64_t(j))) continue;
      const auto w = hn::Set(d, p[i * ldp + j]);
      for (size_t c = 0; c < n; c += hn::Lanes(d))
        hn::Store(hn::MulAdd(w, hn::LoadU(d, v + j * ldv + c), hn::Load(d, orow + c)), d, orow + c);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // ATTNZOO_PREFILL_HIDDEN_VALUES_INL_H_
