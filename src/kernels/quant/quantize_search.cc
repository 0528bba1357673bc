// The scale searches of llama.cpp's K-quant and importance-weighted quantizers (the math of ggml-quants.c's
// make_qx_quants, make_q3_quants, make_qkx2_quants / make_qkx3_quants and make_qp_quants, written here from their
// description): try a small grid of scales around the plain one, refit each candidate's scale (and minimum) by
// weighted least squares on the levels it rounds to, keep the candidate with the smallest weighted error; or move
// one level at a time while the fit improves. Every product is formed in llama.cpp's order (w * l * l is
// (w * l) * l, an error term w * (diff * diff)), so Q2_K / Q3_K give llama-quantize's bytes exactly.
#include <algorithm>
#include <cmath>

#include "kernels/quant/quantize.h"

namespace attnzoo::quant_detail {
namespace {
constexpr float kGroupMaxEps = 1e-15f;  // a group whose largest |x| is below this is all zero

// The value of largest magnitude, sign kept (llama.cpp's symmetric searches scale from it); 0 with every level 0
// for a group that is all (near) zero.
float signed_max_or_zero(int n, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.0f;
  }
  return max;
}
}

float search_symmetric(int n, int nmax, const float* x, const float* w, int8_t* L) {
  const float max = signed_max_or_zero(n, x, L);
  if (max == 0.0f) return 0.0f;
  auto weight = [&](int i) { return w ? w[i] : x[i] * x[i]; };
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  // Least-squares scale for the levels a given inverse scale rounds to: sum w x l / sum w l^2.
  auto fit = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      *sumlx += weight(i) * x[i] * float(l);
      *suml2 += weight(i) * float(l) * float(l);
    }
  };
  float iscale = float(-nmax) / max;
  float sumlx, suml2;
  fit(iscale, &sumlx, &suml2);
  for (int i = 0; i < n; ++i) L[i] = int8_t(level(iscale, i) + nmax);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;  // the error's reduction sumlx^2 / suml2: larger is better
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    fit(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = int8_t(level(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float search_with_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                      float rdelta, int nstep, bool absolute_error) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;  // the minimum is an offset below zero only: a block of positives keeps level 0 at 0
  if (max <= min) {
    std::fill(L, L + n, uint8_t(0));
    *neg_min = -min;
    return 0.0f;
  }
  auto error_of = [&](float scale, float mn, const uint8_t* levels) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * float(levels[i]) + mn - x[i];
      err += w[i] * (absolute_error ? std::fabs(diff) : diff * diff);
    }
    return err;
  };
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) L[i] = uint8_t(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  float best_error = error_of(scale, min, L);
  uint8_t aux[256];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = uint8_t(l);
      sum_l += w[i] * float(l);
      sum_l2 += w[i] * float(l) * float(l);
      sum_xl += w[i] * float(l) * x[i];
    }
    // Weighted least squares for x ~ scale * l + min over the candidate's levels.
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float err = error_of(this_scale, this_min, aux);
      if (err < best_error) {
        std::copy(aux, aux + n, L);
        best_error = err;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

namespace {

// Coordinate descent on signed or unsigned levels (make_qp_quants / make_q3_quants): take one value's level out
// of the fit, put back the level the rest's scale sum(w x l) / sum(w l^2) rounds it to, keep the move while the
// explained energy sumlx^2 / suml2 grows; at most five passes. `rest_first`: skip a value whose removal leaves no
// energy (make_qp_quants checks that before the move, make_q3_quants after it).
template <class Level, class Weight>
void refine_levels(int n, int lo, int hi, const float* x, Weight weight, Level* L, float* sumlx, float* suml2,
                   bool rest_first) {
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weight(i);
      float slx = *sumlx - w * x[i] * float(L[i]);
      if (!(slx > 0)) continue;
      float sl2 = *suml2 - w * float(L[i]) * float(L[i]);
      if (rest_first && !(sl2 > 0)) continue;
      const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), lo, hi);
      if (new_l == int(L[i])) continue;
      slx += w * x[i] * float(new_l);
      sl2 += w * float(new_l) * float(new_l);
      if (sl2 > 0 && slx * slx * *suml2 > *sumlx * *sumlx * sl2) {
        L[i] = Level(new_l);
        *sumlx = slx;
        *suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
}

}  // namespace

float search_positive(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::fill(L, L + n, uint8_t(0));
    return 0.0f;
  }
  auto mse_of = [&](float iscale) {
    const float scale = 1 / iscale;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - scale * float(std::min(nmax, nearest_int(iscale * x[i])));
      mse += w[i] * diff * diff;
    }
    return mse;
  };
  float iscale = float(nmax) / max;
  float best_mse = mse_of(iscale);
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float candidate = (0.1f * float(is) + float(nmax)) / max;
    const float mse = mse_of(candidate);
    if (mse < best_mse) best_mse = mse, iscale = candidate;
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = uint8_t(l);
    sumlx += w[i] * x[i] * float(l);
    suml2 += w[i] * float(l) * float(l);
  }
  refine_levels(n, -(1 << 30), nmax, x, [&](int i) { return w[i]; }, L, &sumlx, &suml2, true);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

float search_symmetric_refined(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max_or_zero(n, x, L);
  if (max == 0.0f) return 0.0f;
  const float iscale = float(-nmax) / max;
  auto weight = [&](int i) { return x[i] * x[i]; };  // large values matter most
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = int8_t(l);
    sumlx += weight(i) * x[i] * float(l);
    suml2 += weight(i) * float(l) * float(l);
  }
  refine_levels(n, -nmax, nmax - 1, x, weight, L, &sumlx, &suml2, false);
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

}  // namespace attnzoo::quant_detail
