// Per-target kernels behind quant_gemv. Integer path: each weight row is unpacked once into int16 values with an
// f32 scale (and, for formats with a minimum, an f32 offset) per sub-block of S = 16 or 32 elements, so that
// w_k = scale * q_k + offset; it is then dotted with every token's 8-bit activations by int16 pair products
// (vpmaddwd) summed per sub-block in i32 lanes, converted once and scaled: per sub-block
//   sum_k w_k x_k = d_x (scale * sum_k q_k xq_k + offset * sum_k xq_k).
// The hot formats unpack with vector ops; the others are plain loops over bytes, compiled per target. (For Q4_0,
// Q4_1, Q8_0, Q4_K and Q6_K, gemv_avx512vnni.cc replaces this path on CPUs with AVX-512 VNNI and gemv_avx2.cc on
// the others with AVX2, so it serves the other formats and the scalar target.) Activations are quantized
// here too. (The f32 path is gemv_f32.cc.)
#include <cmath>
#include <cstring>
#include <limits>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/quant_blocks.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/gemv_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/quant/gemv_unpack-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- the integer dot ---------------------------------------------------------------------------------------

// Output rows of a task, kT (<= 4) tokens starting at t0, against one unpacked row.
template <int S, bool kOffset, size_t kT>
HWY_INLINE void DotRow(const int16_t* HWY_RESTRICT w, const float* HWY_RESTRICT sc, const float* HWY_RESTRICT off,
                       size_t K, const QuantActivations& a, size_t t0, float* out) {
  const size_t nsub = K / S;
#if HWY_TARGET == HWY_SCALAR
  float acc[kT] = {};
  for (size_t j = 0; j < nsub; ++j)
    for (size_t t = 0; t < kT; ++t) {
      const int16_t* x = a.q + (t0 + t) * K + j * S;
      int32_t s = 0;
      for (int i = 0; i < S; ++i) s += int32_t(w[j * S + i]) * x[i];
      acc[t] += float(s) * (sc[j] * a.d[(t0 + t) * (K / 32) + j * S / 32]);
    }
  for (size_t t = 0; t < kT; ++t) out[t] = acc[t];
#else
  const hn::CappedTag<int16_t, S> d16;
  const hn::RepartitionToWide<decltype(d16)> d32;
  const hn::RebindToFloat<decltype(d32)> df;
  using VF = hn::Vec<decltype(df)>;
  using V32 = hn::Vec<decltype(d32)>;
  const size_t L = hn::Lanes(d16);
  // Two accumulators per token, whatever kT: with one, a single chain of FMAs would wait on its own latency, and
  // a count that followed kT would give a token another sum in another group (quant_gemv promises each token
  // the result it gets alone).
  constexpr size_t kU = 2;
  VF acc[kT][kU];
  for (size_t t = 0; t < kT; ++t)
    for (size_t u = 0; u < kU; ++u) acc[t][u] = hn::Zero(df);
  auto sub_block = [&](size_t j, size_t u) HWY_ATTR {
    V32 isum[kT], unused[kT];
    for (size_t t = 0; t < kT; ++t) isum[t] = unused[t] = hn::Zero(d32);
    for (size_t i = 0; i < size_t(S); i += L) {
      const auto wv = hn::LoadU(d16, w + j * S + i);
      for (size_t t = 0; t < kT; ++t)
        isum[t] = hn::ReorderWidenMulAccumulate(d32, wv, hn::LoadU(d16, a.q + (t0 + t) * K + j * S + i), isum[t],
                                                unused[t]);
    }
    for (size_t t = 0; t < kT; ++t) {
      const float dx = a.d[(t0 + t) * (K / 32) + j * S / 32];
      // unused[t] is zero on x86 (vpmaddwd sums the pairs itself); added for targets that split the pairs.
      acc[t][u] = hn::MulAdd(hn::ConvertTo(df, hn::Add(isum[t], unused[t])), hn::Set(df, sc[j] * dx), acc[t][u]);
    }
  };
  size_t j = 0;
  for (; j + kU <= nsub; j += kU)
    for (size_t u = 0; u < kU; ++u) sub_block(j + u, u);
  for (; j < nsub; ++j) sub_block(j, 0);
  for (size_t t = 0; t < kT; ++t)
    for (size_t u = 1; u < kU; ++u) acc[t][0] = hn::Add(acc[t][0], acc[t][u]);
  for (size_t t = 0; t < kT; ++t) out[t] = hn::GetLane(hn::SumOfLanes(df, acc[t][0]));
#endif
  if (kOffset)
    for (size_t t = 0; t < kT; ++t) {
      float o;
      DotF32<1>(off, (S == 32 ? a.dsum32 + (t0 + t) * (K / 32) : a.dsum16 + (t0 + t) * (K / 16)), nsub, &o);
      out[t] += o;
    }
}

template <class U>
void GemvInt8Typed(const QuantGemvTask& g) {
  const size_t K = size_t(g.w.cols), nsub = K / U::S, blocks = K / U::kBlock;
  constexpr size_t kSubPerBlock = U::kBlock / U::S;
  thread_local AlignedBuffer<int16_t> q;
  thread_local AlignedBuffer<float> sc, off;
  q.resize(K);
  sc.resize(nsub);
  off.resize(nsub);
  for (size_t n = g.n0; n < g.n1; ++n) {
    const uint8_t* row = g.w.row(int64_t(n));
    for (size_t i = 0; i < blocks; ++i)
      U::Unpack(row + i * U::kBytes, q.data() + i * U::kBlock, sc.data() + i * kSubPerBlock,
                off.data() + i * kSubPerBlock);
    for (size_t t0 = 0; t0 < g.T; t0 += 4) {
      float out[4];
      switch (HWY_MIN(g.T - t0, size_t(4))) {
        case 1: DotRow<U::S, U::kOffset, 1>(q.data(), sc.data(), off.data(), K, g.act, t0, out); break;
        case 2: DotRow<U::S, U::kOffset, 2>(q.data(), sc.data(), off.data(), K, g.act, t0, out); break;
        case 3: DotRow<U::S, U::kOffset, 3>(q.data(), sc.data(), off.data(), K, g.act, t0, out); break;
        default: DotRow<U::S, U::kOffset, 4>(q.data(), sc.data(), off.data(), K, g.act, t0, out); break;
      }
      for (size_t t = t0; t < HWY_MIN(g.T, t0 + 4); ++t) g.y[t * g.ldy + n] = out[t - t0] + (g.bias ? g.bias[n] : 0.f);
    }
  }
}

void GemvRowsInt8(const QuantGemvTask& g) {
  switch (g.w.type) {
    case QuantType::Q4_0: return GemvInt8Typed<Q4_0U>(g);
    case QuantType::Q4_1: return GemvInt8Typed<Q4_1U>(g);
    case QuantType::Q5_0: return GemvInt8Typed<Q5U<false>>(g);
    case QuantType::Q5_1: return GemvInt8Typed<Q5U<true>>(g);
    case QuantType::Q8_0: return GemvInt8Typed<Q8_0U>(g);
    case QuantType::MXFP4: return GemvInt8Typed<Mxfp4U>(g);
    case QuantType::IQ4_NL: return GemvInt8Typed<Iq4_NLU>(g);
    case QuantType::IQ4_XS: return GemvInt8Typed<Iq4_XSU>(g);
    case QuantType::Q2_K: return GemvInt8Typed<Q2_KU>(g);
    case QuantType::Q3_K: return GemvInt8Typed<Q3_KU>(g);
    case QuantType::Q4_K: return GemvInt8Typed<QK_U<false>>(g);
    case QuantType::Q5_K: return GemvInt8Typed<QK_U<true>>(g);
    case QuantType::Q6_K: return GemvInt8Typed<Q6_KU>(g);
    default: return;  // the caller routes other formats to the f32 path
  }
}

// ---- activations -------------------------------------------------------------------------------------------

// Vectors of at most 16 floats, so that one never straddles two groups of 16.
void QuantizeActivations(const float* x, size_t T, size_t K, const QuantActivationsOut& out) {
  const QuantActivationsOut o = out;  // a copy: the stores below would otherwise make each pointer a reload
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int16_t, decltype(df)> d16;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const hn::CappedTag<float, 8> df8;
  const size_t L = hn::Lanes(df);
  for (size_t t = 0; t < T; ++t) {
    for (size_t b = 0; b < K / 32; ++b) {
      const float* xb = x + t * K + 32 * b;
      auto vmax = hn::Zero(df), poison = hn::Zero(df);
      for (size_t i = 0; i < 32; i += L) {
        const auto v = hn::LoadU(df, xb + i);
        vmax = hn::Max(vmax, hn::Abs(v));
        poison = hn::Add(poison, hn::Mul(v, hn::Zero(df)));  // NaN if any value is inf or NaN
      }
      // A non-finite activation makes the block's scale NaN (values 0), so the outputs are NaN as with dense
      // weights instead of finite garbage.
      const bool finite = hn::AllFalse(df, hn::IsNaN(poison));
      const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
      const float db = finite ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
      const float id = finite && db != 0.f ? 1.f / db : 0.f;
      o.d[t * (K / 32) + b] = db;
      hn::Vec<decltype(di)> half[2] = {hn::Zero(di), hn::Zero(di)};  // lane-wise sums of each 16
      for (size_t i = 0; i < 32; i += L) {
        const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), hn::Set(df, id)));  // |qi| <= 127
        if (o.q) hn::StoreU(hn::DemoteTo(d16, qi), d16, o.q + t * K + 32 * b + i);
        half[i / 16] = hn::Add(half[i / 16], qi);
        if (o.xs8) hn::StoreU(hn::DemoteTo(d8, qi), d8, o.xs8 + t * o.ld8 + 32 * b + i);
      }
      const int32_t sum[2] = {hn::GetLane(hn::SumOfLanes(di, half[0])), hn::GetLane(hn::SumOfLanes(di, half[1]))};
      o.dsum16[t * (K / 16) + 2 * b] = db * float(sum[0]);
      o.dsum16[t * (K / 16) + 2 * b + 1] = db * float(sum[1]);
      o.dsum32[t * (K / 32) + b] = db * float(sum[0] + sum[1]);
      o.xsum16[t * (K / 16) + 2 * b] = sum[0];
      o.xsum16[t * (K / 16) + 2 * b + 1] = sum[1];
      if (o.dx8)
        for (size_t l = 0; l < 8; l += hn::Lanes(df8)) hn::StoreU(hn::Set(df8, db), df8, o.dx8 + t * (o.ld8 / 4) + 8 * b + l);
    }
    // padding: the value 0 (scale 0), so that a row's last odd block can be read as a pair
    if (o.xs8)
      for (size_t k = K; k < o.ld8; ++k) o.xs8[t * o.ld8 + k] = 0;
    if (o.dx8)
      for (size_t l = K / 4; l < o.ld8 / 4; ++l) o.dx8[t * (o.ld8 / 4) + l] = 0.f;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(GemvRowsInt8);
HWY_EXPORT(QuantizeActivations);

void quant_gemv_rows_int8(const QuantGemvTask& task) {
  if (task.w.row_group) return on_gguf_rows(task, quant_gemv_rows_int8);
  HWY_DYNAMIC_DISPATCH(GemvRowsInt8)(task);
}
void quantize_activations(const float* x, size_t T, size_t K, const QuantActivationsOut& out) {
  HWY_DYNAMIC_DISPATCH(QuantizeActivations)(x, T, K, out);
}

}  // namespace attnzoo
#endif
