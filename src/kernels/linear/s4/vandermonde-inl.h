// The Vandermonde products of S4D / DSS, per target: sums over modes of w_n z_n^l for every l of a row (the
// kernel, the initial state's contribution) and of u_j z_n^(T-1-j) over a sequence (the final state).
// Powers are taken in 64-step tiles: z^(l0) for each tile by a running product in double, z^j (j < 64) from an
// f32 table, so every term carries a few f32 roundings whatever l is. Powering in f32 alone would compound
// z's rounding l times (a relative 1e-3 at l = 16k); computing every power in double would cost a complex
// multiply in double per (mode, step), which is the recurrence's own price. Per-target header.
#if defined(ATTNZOO_S4_VANDERMONDE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_S4_VANDERMONDE_INL_H_
#undef ATTNZOO_S4_VANDERMONDE_INL_H_
#else
#define ATTNZOO_S4_VANDERMONDE_INL_H_
#endif

#include <complex>

#include <hwy/highway.h>

#include "core/aligned_buffer.h"
#include "kernels/linear/s4/problem.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kVandTile = 64;

// Per mode: z^j for j < kVandTile (re at [n * 64], im at [(N + n) * 64]), and z^64 in double.
struct PowerTable {
  AlignedBuffer<float> pow;
  std::vector<std::complex<double>> tile_step;
  void build(const std::complex<double>* log_z, int64_t N) {
    pow.resize(size_t(2 * N) * kVandTile);
    tile_step.resize(size_t(N));
    for (int64_t n = 0; n < N; ++n) {
      const std::complex<double> z = cexp(log_z[n]);
      std::complex<double> p = 1.0;
      for (size_t j = 0; j < kVandTile; ++j, p = cmul(p, z)) {
        pow[size_t(n) * kVandTile + j] = float(p.real());
        pow[size_t(N + n) * kVandTile + j] = float(p.imag());
      }
      tile_step[size_t(n)] = p;  // the loop ends at z^64
    }
  }
};

// out[l] = 2 Re(sum_n w[n] z_n^l) for l < len (overwritten); `anchor` is scratch of 2 N floats.
inline void VandermondeRow(const PowerTable& table, const std::complex<double>* w, int64_t N, int64_t len,
                           float* out, std::vector<std::complex<double>>& a, float* anchor) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d);
  a.assign(w, w + N);
  HWY_ALIGN float tile[kVandTile];
  for (int64_t l0 = 0; l0 < len; l0 += int64_t(kVandTile)) {
    for (int64_t n = 0; n < N; ++n) {
      anchor[n] = float(2.0 * a[size_t(n)].real()), anchor[N + n] = float(2.0 * a[size_t(n)].imag());
      a[size_t(n)] = cmul(a[size_t(n)], table.tile_step[size_t(n)]);
    }
    for (size_t v = 0; v < kVandTile; v += 2 * V) {  // two vectors of l, real and imaginary products apart:
      auto r0 = hn::Zero(d), r1 = hn::Zero(d), i0 = hn::Zero(d), i1 = hn::Zero(d);  // four independent chains
      for (int64_t n = 0; n < N; ++n) {
        const float* pr = table.pow.data() + size_t(n) * kVandTile + v;
        const float* pi = table.pow.data() + size_t(N + n) * kVandTile + v;
        const auto ar = hn::Set(d, anchor[n]), ai = hn::Set(d, anchor[N + n]);
        r0 = hn::MulAdd(ar, hn::Load(d, pr), r0);
        r1 = hn::MulAdd(ar, hn::Load(d, pr + V), r1);
        i0 = hn::MulAdd(ai, hn::Load(d, pi), i0);
        i1 = hn::MulAdd(ai, hn::Load(d, pi + V), i1);
      }
      hn::Store(hn::Sub(r0, i0), d, tile + v);
      hn::Store(hn::Sub(r1, i1), d, tile + v + V);
    }
    const int64_t count = std::min<int64_t>(int64_t(kVandTile), len - l0);
    for (int64_t j = 0; j < count; ++j) out[l0 + j] = tile[j];
  }
}

// s[n] = sum_{j < len} u[j] z_n^(len - 1 - j), in double across tiles. `rev` is scratch of len + 64 floats.
inline void VandermondeTranspose(const PowerTable& table, const float* u, int64_t N, int64_t len,
                                 std::complex<double>* s, float* rev) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d);
  const int64_t padded = (len + int64_t(kVandTile) - 1) / int64_t(kVandTile) * int64_t(kVandTile);
  for (int64_t m = 0; m < padded; ++m) rev[m] = m < len ? u[len - 1 - m] : 0.f;
  for (int64_t n = 0; n < N; ++n) {
    const float* pr = table.pow.data() + size_t(n) * kVandTile;
    const float* pi = table.pow.data() + size_t(N + n) * kVandTile;
    std::complex<double> acc = 0.0, power = 1.0;
    for (int64_t m0 = 0; m0 < padded; m0 += int64_t(kVandTile)) {
      auto sr = hn::Zero(d), si = hn::Zero(d);
      for (size_t v = 0; v < kVandTile; v += V) {
        const auto x = hn::LoadU(d, rev + m0 + int64_t(v));
        sr = hn::MulAdd(x, hn::Load(d, pr + v), sr);
        si = hn::MulAdd(x, hn::Load(d, pi + v), si);
      }
      acc += cmul(power, {hn::GetLane(hn::SumOfLanes(d, sr)), hn::GetLane(hn::SumOfLanes(d, si))});
      power = cmul(power, table.tile_step[size_t(n)]);
    }
    s[n] = acc;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
