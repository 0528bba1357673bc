// The IQ4_NL / IQ4_XS scale search written plainly, as a check on quantize_iq4.cc: every sum and scale in double,
// the nearest grid value found by measuring the distance to all 16 (the larger on a tie), no rescaling. The same
// candidates are tried, so the two agree except where two candidates explain the block equally well to within f32
// rounding (quantize_iq4_test.cc bounds how often that happens and what it costs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/quantize.h"

namespace attnzoo::quant_detail {
namespace {

int nearest_by_distance(double v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - kIq4Values[k]) <= std::fabs(v - kIq4Values[best])) best = k;
  return best;
}

// The weighted least-squares scale of a block of 32 over the best candidate; 0 for an all-zero block.
double reference_block_scale(const float* x, const double* w) {
  double amax = 0, max = 0;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(double(x[j])) > amax) amax = std::fabs(double(x[j])), max = x[j];
  if (amax < 1e-15) return 0;
  // Candidate inverse scales: the largest value on +127 (clipped to the grid's 113), then on -127 + k.
  std::vector<double> inverse = {127 / max};
  for (int k = -7; k <= 7; ++k) inverse.push_back((k - 127) / max);
  double best_d = 0, best_energy = -1;
  for (double id : inverse) {
    double sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const double q = kIq4Values[nearest_by_distance(id * x[j])];
      sumqx += w[j] * q * x[j];
      sumq2 += w[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx / sumq2 > best_energy) best_energy = sumqx * sumqx / sumq2, best_d = sumqx / sumq2;
  }
  return best_d;
}

// One super-block of n (32 or 256): f32 scale d, IQ4_XS's 6-bit scales ls (biased by 32), codes L.
float reference_super_block(const float* x, const float* importance, int n, uint8_t* ls, uint8_t* L) {
  double sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += double(x[j]) * x[j];
  sigma2 *= 2.0 / n;
  double scales[8];
  for (int ib = 0; ib < n / 32; ++ib) {
    const float* xb = x + 32 * ib;
    double w[32], wsum = 0;
    for (int j = 0; j < 32 && importance; ++j)
      wsum += w[j] = importance[32 * ib + j] * std::sqrt(sigma2 + double(xb[j]) * xb[j]);
    if (!(wsum > 0))
      for (int j = 0; j < 32; ++j) w[j] = double(xb[j]) * xb[j];
    scales[ib] = reference_block_scale(xb, w);
  }
  if (n == 32) {
    const double id = scales[0] != 0 ? 1 / scales[0] : 0;
    for (int j = 0; j < 32; ++j) L[j] = uint8_t(nearest_by_distance(id * x[j]));
    return float(scales[0]);
  }
  double max_scale = 0;
  for (int ib = 0; ib < 8; ++ib)
    if (std::fabs(scales[ib]) > std::fabs(max_scale)) max_scale = scales[ib];
  const double d = -max_scale / 32;
  for (int ib = 0; ib < 8; ++ib) {
    const int l = d != 0 ? std::clamp(int(std::nearbyint(scales[ib] / d)), -32, 31) : 0;
    ls[ib] = uint8_t(l + 32);
    for (int j = 0; j < 32; ++j)
      L[32 * ib + j] = uint8_t(l != 0 ? nearest_by_distance(x[32 * ib + j] / (d * l)) : nearest_by_distance(0));
  }
  return float(d);
}

}  // namespace

void quantize_iq4_reference(QuantType t, const float* x, uint8_t* y, int64_t n, const float* importance) {
  const int super = t == QuantType::IQ4_XS ? 256 : 32;
  const int bytes = t == QuantType::IQ4_XS ? 136 : 18;
  for (int64_t b = 0; b < n / super; ++b, x += super, y += bytes) {
    uint8_t L[256], ls[8];
    store_half(y, reference_super_block(x, importance ? importance + b * super : nullptr, super, ls, L));
    if (super == 256) pack_iq4_xs_scales(ls, y);
    pack_iq4_codes(L, super, y + (super == 256 ? 8 : 2));
  }
}

}  // namespace attnzoo::quant_detail
