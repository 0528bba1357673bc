#include "core/quant_type.h"

#include <array>
#include <limits>

namespace attnzoo {
namespace {

constexpr int64_t kK = 256;  // super-block of the K-quants
constexpr std::array<QuantTypeInfo, 32> kTypes{{
    {QuantType::F32, "F32", 1, 4},           {QuantType::F16, "F16", 1, 2},
    {QuantType::Q4_0, "Q4_0", 32, 18},       {QuantType::Q4_1, "Q4_1", 32, 20},
    {QuantType::Q5_0, "Q5_0", 32, 22},       {QuantType::Q5_1, "Q5_1", 32, 24},
    {QuantType::Q8_0, "Q8_0", 32, 34},       {QuantType::Q8_1, "Q8_1", 32, 36},
    {QuantType::Q2_K, "Q2_K", kK, 84},       {QuantType::Q3_K, "Q3_K", kK, 110},
    {QuantType::Q4_K, "Q4_K", kK, 144},      {QuantType::Q5_K, "Q5_K", kK, 176},
    {QuantType::Q6_K, "Q6_K", kK, 210},      {QuantType::Q8_K, "Q8_K", kK, 292},
    {QuantType::IQ2_XXS, "IQ2_XXS", kK, 66}, {QuantType::IQ2_XS, "IQ2_XS", kK, 74},
    {QuantType::IQ3_XXS, "IQ3_XXS", kK, 98}, {QuantType::IQ1_S, "IQ1_S", kK, 50},
    {QuantType::IQ4_NL, "IQ4_NL", 32, 18},   {QuantType::IQ3_S, "IQ3_S", kK, 110},
    {QuantType::IQ2_S, "IQ2_S", kK, 82},     {QuantType::IQ4_XS, "IQ4_XS", kK, 136},
    {QuantType::I8, "I8", 1, 1},             {QuantType::I16, "I16", 1, 2},
    {QuantType::I32, "I32", 1, 4},           {QuantType::I64, "I64", 1, 8},
    {QuantType::F64, "F64", 1, 8},           {QuantType::IQ1_M, "IQ1_M", kK, 56},
    {QuantType::BF16, "BF16", 1, 2},         {QuantType::TQ1_0, "TQ1_0", kK, 54},
    {QuantType::TQ2_0, "TQ2_0", kK, 66},     {QuantType::MXFP4, "MXFP4", 32, 17},
}};

}  // namespace

std::optional<QuantTypeInfo> quant_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (uint32_t(t.type) == id) return t;
  return std::nullopt;
}

const char* quant_type_name(QuantType t) {
  auto info = quant_type_info(uint32_t(t));
  return info ? info->name : "?";
}

bool quant_is_blocked(QuantType t) {
  const auto info = quant_type_info(uint32_t(t));
  return info && info->block_elems > 1;
}

std::optional<DType> dtype_of(QuantType t) {
  switch (t) {
    case QuantType::F32: return DType::f32;
    case QuantType::F16: return DType::f16;
    case QuantType::BF16: return DType::bf16;
    case QuantType::I32: return DType::i32;
    case QuantType::I64: return DType::i64;
    default: return std::nullopt;
  }
}

std::optional<QuantType> quant_type_of(DType t) {
  switch (t) {
    case DType::f32: return QuantType::F32;
    case DType::f16: return QuantType::F16;
    case DType::bf16: return QuantType::BF16;
    case DType::i32: return QuantType::I32;
    case DType::i64: return QuantType::I64;
    case DType::u8:
    case DType::i8:       // GGUF's I8 is a plain integer tensor, not a quantized KV row with scales
    case DType::f8_e4m3:  // no GGUF type
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<int64_t> quant_row_bytes(QuantType t, int64_t elems) {
  auto info = quant_type_info(uint32_t(t));
  if (!info || elems < 0 || elems % info->block_elems != 0) return std::nullopt;
  const int64_t blocks = elems / info->block_elems;
  if (blocks > std::numeric_limits<int64_t>::max() / info->block_bytes) return std::nullopt;
  return blocks * info->block_bytes;
}

}  // namespace attnzoo
