// Per-target unpacking of one block of each GGUF format into int16 values with an f32 scale (and offset) per
// sub-block of S = 16 or 32 elements, w_k = scale * q_k + offset: the integer GEMV rows (gemv_kernels.cc) dot
// them with 8-bit activations; the f32 rows (gemv_f32.cc) use them for the formats without a register decoder.
// Also the plain f32 dot of a row with kT tokens. Included after foreach_target.h, once per target.
#if defined(ATTNZOO_QUANT_GEMV_UNPACK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_QUANT_GEMV_UNPACK_INL_H_
#undef ATTNZOO_QUANT_GEMV_UNPACK_INL_H_
#else
#define ATTNZOO_QUANT_GEMV_UNPACK_INL_H_
#endif

#include <hwy/highway.h>

#include "kernels/quant/half-inl.h"
#include "kernels/quant/iq4_codes-inl.h"
#include "kernels/quant/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D16 = hn::CappedTag<int16_t, 16>;

// n packed bytes (n a multiple of 16): low nibbles - bias to lo[0, n), high nibbles - bias to hi[0, n).
HWY_INLINE void UnpackNibbles(const uint8_t* HWY_RESTRICT p, size_t n, int16_t* HWY_RESTRICT lo,
                              int16_t* HWY_RESTRICT hi, int16_t bias) {
  const D16 d;
  const hn::Rebind<uint8_t, D16> du8;
  const auto mask = hn::Set(d, int16_t(0xF)), b = hn::Set(d, bias);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    const auto v = hn::PromoteTo(d, hn::LoadU(du8, p + j));
    hn::StoreU(hn::Sub(hn::And(v, mask), b), d, lo + j);
    hn::StoreU(hn::Sub(hn::ShiftRight<4>(v), b), d, hi + j);
  }
}

struct Q4_0U {
  static constexpr int S = 32, kBlock = 32, kBytes = 18;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    sc[0] = Half(b);
    UnpackNibbles(b + 2, 16, q, q + 16, 8);
  }
};

struct Q4_1U {
  static constexpr int S = 32, kBlock = 32, kBytes = 20;
  static constexpr bool kOffset = true;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float* off) {
    sc[0] = Half(b);
    off[0] = Half(b + 2);
    UnpackNibbles(b + 4, 16, q, q + 16, 0);
  }
};

template <bool kMin>
struct Q5U {
  static constexpr int S = 32, kBlock = 32, kBytes = kMin ? 24 : 22;
  static constexpr bool kOffset = kMin;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float* off) {
    sc[0] = Half(b);
    if (kMin) off[0] = Half(b + 2);
    const uint8_t* p = b + (kMin ? 4 : 2);
    const uint32_t qh = load_u32(p);
    const int bias = kMin ? 0 : 16;
    for (int j = 0; j < 16; ++j) {
      q[j] = int16_t(((p[4 + j] & 0xF) | (((qh >> j) & 1) << 4)) - bias);
      q[j + 16] = int16_t(((p[4 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - bias);
    }
  }
};

struct Q8_0U {
  static constexpr int S = 32, kBlock = 32, kBytes = 34;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    sc[0] = Half(b);
    const D16 d;
    const hn::Rebind<int8_t, D16> di8;
    for (size_t j = 0; j < 32; j += hn::Lanes(d))
      hn::StoreU(hn::PromoteTo(d, hn::LoadU(di8, reinterpret_cast<const int8_t*>(b + 2) + j)), d, q + j);
  }
};

struct Mxfp4U {
  static constexpr int S = 32, kBlock = 32, kBytes = 17;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    sc[0] = e8m0_to_f32_half(b[0]);
    for (int j = 0; j < 16; ++j) {
      q[j] = kMxfp4Values[b[1 + j] & 0xF];
      q[j + 16] = kMxfp4Values[b[1 + j] >> 4];
    }
  }
};

// 32 IQ4 codes through the grid (iq4_codes-inl.h) to int16. The values fit int8, so the integer rows' pair
// products cannot overflow.
HWY_INLINE void UnpackIq4(const uint8_t* HWY_RESTRICT qs, int16_t* HWY_RESTRICT q) {
  HWY_ALIGN int8_t codes[32];
  Iq4Codes(qs, codes);
  const D16 d;
  const hn::Rebind<int8_t, D16> di8;
  for (size_t j = 0; j < 32; j += hn::Lanes(d)) hn::StoreU(hn::PromoteTo(d, hn::LoadU(di8, codes + j)), d, q + j);
}

struct Iq4_NLU {
  static constexpr int S = 32, kBlock = 32, kBytes = 18;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    sc[0] = Half(b);
    UnpackIq4(b + 2, q);
  }
};

struct Iq4_XSU {
  static constexpr int S = 32, kBlock = 256, kBytes = 136;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    const float d = Half(b);
    for (int j = 0; j < 8; ++j) {
      sc[j] = d * float(iq4_xs_scale(b, j));
      UnpackIq4(b + 8 + 16 * j, q + 32 * j);
    }
  }
};

// 2-bit fields as Q2_K / Q3_K lay them out: element e of the 256 is bits 2 ((e % 128) / 32) of byte
// 32 (e / 128) + e % 32.
HWY_INLINE void Unpack2Bit(const uint8_t* qs, int16_t* q) {
  for (int half = 0; half < 2; ++half)
    for (int s = 0; s < 4; ++s)
      for (int l = 0; l < 32; ++l) q[128 * half + 32 * s + l] = int16_t((qs[32 * half + l] >> (2 * s)) & 3);
}

struct Q2_KU {
  static constexpr int S = 16, kBlock = 256, kBytes = 84;
  static constexpr bool kOffset = true;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float* off) {
    const float d = Half(b + 80), dmin = Half(b + 82);
    for (int s = 0; s < 16; ++s) {
      sc[s] = d * float(b[s] & 0xF);
      off[s] = -(dmin * float(b[s] >> 4));
    }
    Unpack2Bit(b + 16, q);
  }
};

struct Q3_KU {
  static constexpr int S = 16, kBlock = 256, kBytes = 110;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    const uint8_t* hmask = b;
    const uint8_t* s12 = b + 96;
    const float d = Half(b + 108);
    for (int s = 0; s < 16; ++s) {
      const int lo4 = s < 8 ? s12[s] & 0xF : s12[s - 8] >> 4;
      const int hi2 = (s12[8 + s % 4] >> (2 * (s / 4))) & 3;
      sc[s] = d * float((lo4 | (hi2 << 4)) - 32);
    }
    Unpack2Bit(b + 32, q);
    for (int bit = 0; bit < 8; ++bit)
      for (int l = 0; l < 32; ++l) q[32 * bit + l] = int16_t(q[32 * bit + l] - (((hmask[l] >> bit) & 1) ? 0 : 4));
  }
};

template <bool kFive>
struct QK_U {  // Q4_K and Q5_K
  static constexpr int S = 32, kBlock = 256, kBytes = kFive ? 176 : 144;
  static constexpr bool kOffset = true;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float* off) {
    const float d = Half(b), dmin = Half(b + 2);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + (kFive ? 48 : 16);
    for (int j = 0; j < 8; ++j) {
      const KScaleMin sm = k_scale_min(b + 4, j);
      sc[j] = d * float(sm.scale);
      off[j] = -(dmin * float(sm.min));
    }
    for (int c = 0; c < 4; ++c) UnpackNibbles(qs + 32 * c, 32, q + 64 * c, q + 64 * c + 32, 0);
    if (kFive)
      for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l) q[32 * j + l] = int16_t(q[32 * j + l] | (((qh[l] >> j) & 1) << 4));
  }
};

struct Q6_KU {
  static constexpr int S = 16, kBlock = 256, kBytes = 210;
  static constexpr bool kOffset = false;
  static void Unpack(const uint8_t* b, int16_t* q, float* sc, float*) {
    const uint8_t* ql = b;
    const float scale = Half(b + 208);
    for (int s = 0; s < 16; ++s) sc[s] = scale * float(int8_t(b[192 + s]));
    // Element m of a half (m < 64): low nibble of ql[m], bits 2 (m / 32) of qh[m % 32]; element 64 + m: high
    // nibble, bits 2 (m / 32) + 4. A vector of m never crosses a multiple of 32.
    const D16 d;
    const hn::Rebind<uint8_t, D16> du8;
    const auto mask4 = hn::Set(d, int16_t(0xF)), mask2 = hn::Set(d, int16_t(3)), bias = hn::Set(d, int16_t(32));
    for (int half = 0; half < 2; ++half)
      for (size_t m = 0; m < 64; m += hn::Lanes(d)) {
        const auto l4 = hn::PromoteTo(d, hn::LoadU(du8, ql + 64 * half + m));
        const auto h2 = hn::PromoteTo(d, hn::LoadU(du8, b + 128 + 32 * half + m % 32));
        const int f = 2 * int(m / 32);
        const auto hi_a = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h2, f), mask2));
        const auto hi_b = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h2, f + 4), mask2));
        hn::StoreU(hn::Sub(hn::Or(hn::And(l4, mask4), hi_a), bias), d, q + 128 * half + m);
        hn::StoreU(hn::Sub(hn::Or(hn::ShiftRight<4>(l4), hi_b), bias), d, q + 128 * half + 64 + m);
      }
  }
};

// out[t] = sum_k w[k] x[t K + k] for kT tokens.
template <size_t kT>
HWY_INLINE void DotF32(const float* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t K, float* out) {
  const hn::ScalableTag<float> df;
  const size_t L = hn::Lanes(df);
  hn::Vec<decltype(df)> acc[kT];
  for (size_t t = 0; t < kT; ++t) acc[t] = hn::Zero(df);
  size_t k = 0;
  for (; k + L <= K; k += L) {
    const auto wv = hn::LoadU(df, w + k);
    for (size_t t = 0; t < kT; ++t) acc[t] = hn::MulAdd(wv, hn::LoadU(df, x + t * K + k), acc[t]);
  }
  for (size_t t = 0; t < kT; ++t) {
    float s = hn::GetLane(hn::SumOfLanes(df, acc[t]));
    for (size_t kk = k; kk < K; ++kk) s += w[kk] * x[t * K + kk];
    out[t] = s;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
