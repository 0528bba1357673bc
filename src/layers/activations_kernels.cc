// Per-target kernels behind apply_activation_inplace and gated_activation.
// The three smooth activations reduce to one Highway Exp and one division per element:
//   silu(x)      = x / (1 + e^-x)
//   gelu_tanh(x) = x/2 (1 + tanh(u)) = x / (1 + e^-2u),  u = sqrt(2/pi) (x + 0.044715 x^3)
//     (the logistic form has no 1 + tanh cancellation for negative x, and Highway's Tanh costs an Expm1 anyway)
//   gelu(x)      = x Phi(x),  Phi = 1 - erfc(|x|/sqrt2)/2 for x >= 0, erfc(|x|/sqrt2)/2 below,
//     erfc(z) ~= t P(t) e^{-z^2},  t = 1 / (1 + p z)  (Highway 1.0.3 has no Erf).
//   relu2(x)     = max(x, 0)^2 (Nemotron-H's MLP), exact.
#include "core/dispatch.h"
#include "layers/activations.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/activations_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// e^88 is finite in f32, and Highway's Exp is only valid up to 104: clamping the exponent keeps 1 + e finite,
// so a huge negative x gives x / 1.6e38 (a tiny value) rather than x / inf or garbage.
constexpr float kMaxExponent = 88.f;

HWY_INLINE VF Silu(DF d, VF x) {
  const VF e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, kMaxExponent)));
  return hn::Div(x, hn::Add(hn::Set(d, 1.f), e));
}

HWY_INLINE VF GeluTanh(DF d, VF x) {
  const VF inner = hn::MulAdd(hn::Mul(hn::Set(d, 0.044715f), x), hn::Mul(x, x), x);
  const VF minus_2u = hn::Mul(hn::Set(d, -2.f * 0.7978845608028654f), inner);
  const VF e = hn::Exp(d, hn::Min(minus_2u, hn::Set(d, kMaxExponent)));
  return hn::Div(x, hn::Add(hn::Set(d, 1.f), e));
}

// erfc(z) e^{z^2} / t as a degree-8 polynomial in t = 1 / (1 + z/2): a least-squares fit (reweighted toward
// minimax) of the relative error on Chebyshev nodes of t for z in [0, 10]; relative error 2e-8 in exact
// arithmetic, a few f32 ulps as evaluated here. P(0) = p / sqrt(pi) is the tail's 1 / (z sqrt(pi)) limit.
HWY_INLINE VF Gelu(DF d, VF x) {
  // Beyond |x| = 14, erfc(|x|/sqrt2) < 1e-44: clamping keeps z^2 and t inside the fitted range.
  const VF ax = hn::Min(hn::Abs(x), hn::Set(d, 14.f));
  const VF one = hn::Set(d, 1.f);
  const VF t = hn::Div(one, hn::MulAdd(hn::Set(d, 0.5f * 0.7071067811865476f), ax, one));
  VF p = hn::Set(d, -5.906951366e-02f);
  p = hn::MulAdd(p, t, hn::Set(d, 2.845775818e-01f));
  p = hn::MulAdd(p, t, hn::Set(d, -4.872051277e-01f));
  p = hn::MulAdd(p, t, hn::Set(d, 2.780728928e-01f));
  p = hn::MulAdd(p, t, hn::Set(d, -2.662942109e-02f));
  p = hn::MulAdd(p, t, hn::Set(d, 2.026883662e-01f));
  p = hn::MulAdd(p, t, hn::Set(d, 2.431034101e-01f));
  p = hn::MulAdd(p, t, hn::Set(d, 2.823753532e-01f));
  p = hn::MulAdd(p, t, hn::Set(d, 2.820864155e-01f));
  // e^{-x^2/2} from x*x (one rounding) rather than (x/sqrt2)^2 (three): the tail is sensitive to the exponent.
  const VF gauss = hn::Exp(d, hn::Mul(hn::Mul(ax, ax), hn::Set(d, -0.5f)));
  const VF half_erfc = hn::Mul(hn::Mul(hn::Set(d, 0.5f), t), hn::Mul(p, gauss));
  // Below zero Phi is the small erfc itself (no 1 + erf cancellation); -0 takes the upper branch like +0.
  const VF phi = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), half_erfc, hn::Sub(one, half_erfc));
  return hn::Mul(x, phi);
}

// Function objects rather than function pointers, so each loop is instantiated with its activation inlined.
struct SiluOp {
  HWY_INLINE VF operator()(DF d, VF x) const { return Silu(d, x); }
};
struct GeluTanhOp {
  HWY_INLINE VF operator()(DF d, VF x) const { return GeluTanh(d, x); }
};
struct GeluOp {
  HWY_INLINE VF operator()(DF d, VF x) const { return Gelu(d, x); }
};
struct Relu2Op {
  HWY_INLINE VF operator()(DF d, VF x) const {
    const VF r = hn::Max(x, hn::Zero(d));
    return hn::Mul(r, r);
  }
};

template <bool kGated, class Act>
HWY_INLINE void ActivationLoop(Act act, const float* gate, const float* up, float* out, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  // Two vectors per step: the Exp and division latencies of one overlap with the other.
  for (; i + 2 * L <= n; i += 2 * L) {
    VF a = act(d, hn::LoadU(d, gate + i)), b = act(d, hn::LoadU(d, gate + i + L));
    if constexpr (kGated) {
      a = hn::Mul(a, hn::LoadU(d, up + i));
      b = hn::Mul(b, hn::LoadU(d, up + i + L));
    }
    hn::StoreU(a, d, out + i);
    hn::StoreU(b, d, out + i + L);
  }
  for (; i < n; i += L) {
    const size_t m = n - i < L ? n - i : L;
    // A partial vector goes through a zero-padded buffer: never read or write past n.
    HWY_ALIGN float g[HWY_MAX_BYTES / sizeof(float)] = {}, u[HWY_MAX_BYTES / sizeof(float)] = {};
    for (size_t j = 0; j < m; ++j) {
      g[j] = gate[i + j];
      if constexpr (kGated) u[j] = up[i + j];
    }
    VF v = act(d, hn::Load(d, g));
    if constexpr (kGated) v = hn::Mul(v, hn::Load(d, u));
    hn::Store(v, d, g);
    for (size_t j = 0; j < m; ++j) out[i + j] = g[j];
  }
}

template <bool kGated>
HWY_INLINE void ActivationRowT(Activation a, const float* gate, const float* up, float* out, size_t n) {
  switch (a) {
    case Activation::silu: return ActivationLoop<kGated>(SiluOp(), gate, up, out, n);
    case Activation::gelu_tanh: return ActivationLoop<kGated>(GeluTanhOp(), gate, up, out, n);
    case Activation::gelu: return ActivationLoop<kGated>(GeluOp(), gate, up, out, n);
    case Activation::relu2: return ActivationLoop<kGated>(Relu2Op(), gate, up, out, n);
  }
}

// up == nullptr: out = act(gate); else out = act(gate) * up.
void ActivationRow(Activation a, const float* gate, const float* up, float* out, size_t n) {
  if (up)
    ActivationRowT<true>(a, gate, up, out, n);
  else
    ActivationRowT<false>(a, gate, up, out, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(ActivationRow);

void apply_activation_inplace(Activation a, float* x, int64_t n) {
  if (n <= 0) return;
  active_target();
  HWY_DYNAMIC_DISPATCH(ActivationRow)(a, x, nullptr, x, size_t(n));
}

void gated_activation(Activation a, const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return;
  active_target();
  HWY_DYNAMIC_DISPATCH(ActivationRow)(a, gate, up, out, size_t(n));
}

}  // namespace attnzoo
#endif  // HWY_ONCE
