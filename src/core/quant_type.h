#pragma once
// The weight formats of llama.cpp's GGUF files, described once (ids as GGUF stores them): how many elements a
// block holds and how many bytes it takes. The GGUF reader sizes tensors from this table, the quantized kernels
// (src/kernels/quant/) dispatch on it, and a format missing here is refused by name instead of misread.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace attnzoo {

enum class QuantType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct QuantTypeInfo {
  QuantType type;
  const char* name;      // as llama.cpp spells it: "Q4_K", "BF16"
  int64_t block_elems;   // elements per block (1 for plain types)
  int64_t block_bytes;   // bytes per block
};

// The entry for a GGUF type id, or nullopt for an id this table does not know (a newer or removed format).
std::optional<QuantTypeInfo> quant_type_info(uint32_t id);
const char* quant_type_name(QuantType t);  // "?" for an unknown id

// Bytes of a row of `elems` elements, or nullopt when elems is not a whole number of blocks or the product
// overflows int64 (files are untrusted: callers turn nullopt into a named error).
std::optional<int64_t> quant_row_bytes(QuantType t, int64_t elems);

// The one definition of "quantized": a block format (several elements share a scale), as opposed to plain
// elements (F32, F16, BF16, integers), which a TensorView can express. Whether a kernel computes with a block
// format is a separate question (quant_supported, src/kernels/quant/quant.h).
bool quant_is_blocked(QuantType t);
// The one mapping between plain storage formats and tensor dtypes: F32 / F16 / BF16 / I32 / I64 <-> f32 / f16 /
// bf16 / i32 / i64; nullopt for block formats (and F64, I8, I16) and for u8.
std::optional<DType> dtype_of(QuantType t);
std::optional<QuantType> quant_type_of(DType t);

}  // namespace attnzoo
