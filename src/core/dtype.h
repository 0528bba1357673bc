#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace attnzoo {

// i8 and f8_e4m3 exist only as quantized KV-cache storage (an f32 scale beside each row of each head, see
// kernels/softmax/kv_quant.h); no kernel takes them as ordinary operands.
enum class DType : uint8_t { f32, bf16, f16, i32, i64, u8, i8, f8_e4m3 };

inline bool is_quantized_kv(DType t) { return t == DType::i8 || t == DType::f8_e4m3; }

size_t dtype_size(DType t);
const char* dtype_name(DType t);

// bf16 is the top half of an f32; rounding to nearest even keeps round-trips unbiased (as torch does).
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// float8 e4m3fn (OCP FP8, torch.float8_e4m3fn): bias 7, no infinities, 0x7f / 0xff are NaN, largest 448.
float f8e4m3_to_f32(uint8_t b);
// Round to nearest even; finite values beyond the range saturate to +-448 (torch would give NaN there; the
// KV quantizer scales rows so that never happens), NaN stays NaN.
uint8_t f32_to_f8e4m3(float f);

// DTypeError "<where>: <dtype> is not a float type": the integer dtypes have no f32 reading here (a file's I32
// norm weight read as zeros would be silent garbage). Out of line, so the inline readers stay small.
[[noreturn]] void throw_not_float(DType t, const char* where);

// Element i of a buffer of the given float dtype, widened to f32 (slow path: references, tests, set-up code);
// throw_not_float for an integer dtype.
inline float load_as_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::i8: return float(static_cast<const int8_t*>(base)[i]);
    case DType::f8_e4m3: return f8e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    default: throw_not_float(t, "load_as_f32");
  }
}

inline void store_from_f32(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); break;
    default: break;
  }
}

}  // namespace attnzoo
