#include "core/dtype.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace attnzoo {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::u8: case DType::i8: case DType::f8_e4m3: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::i8: return "int8";
    case DType::f8_e4m3: return "float8_e4m3fn";
  }
  return "?";
}

void throw_not_float(DType t, const char* where) {
  throw DTypeError(std::string(where) + ": " + dtype_name(t) + " is not a float type");
}

// IEEE half conversions written out (no F16C dependency, so the scalar target stays portable).
float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int32_t exp = int32_t((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(half);
}

float f8e4m3_to_f32(uint8_t b) {
  const uint32_t exp = (b >> 3) & 0xf, mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  float mag;
  if (exp == 0) {
    mag = float(mant) * 0x1p-9f;  // subnormal: mant / 8 * 2^-6
  } else {
    const uint32_t bits = ((exp + 127 - 7) << 23) | (mant << 20);
    std::memcpy(&mag, &bits, 4);
  }
  return (b & 0x80) ? -mag : mag;
}

uint8_t f32_to_f8e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  bits &= 0x7fffffffu;
  if (bits > 0x7f800000u) return uint8_t(sign | 0x7f);
  float mag;
  std::memcpy(&mag, &bits, 4);
  if (mag >= 448.f) return uint8_t(sign | 0x7e);
  if (mag < 0x1p-6f) {  // subnormal range: multiples of 2^-9, rounded to nearest even (8 is the smallest normal)
    return uint8_t(sign | uint8_t(std::nearbyint(mag * 512.f)));
  }
  const uint32_t exp = (bits >> 23) - 127 + 7, mant = bits & 0x7fffff;
  uint32_t q = (exp << 3) | (mant >> 20);
  const uint32_t rem = mant & 0xfffff;
  if (rem > 0x80000 || (rem == 0x80000 && (q & 1))) ++q;  // a carry moves into the exponent, as it should
  return uint8_t(sign | (q > 0x7e ? 0x7e : q));
}

}  // namespace attnzoo
