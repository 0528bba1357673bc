#include "layers/embedding.h"

#include "core/convert.h"
#include "core/error.h"

namespace attnzoo {

Embedding::Embedding(const TensorView& table, const std::string& name) : table_(table) {
  require(table.ndim == 2 && table.is_contiguous(), name.c_str(), "embedding must be 2-D [vocab, hidden], got " + table.shape_str());
  if (table.dtype != DType::f32 && table.dtype != DType::bf16 && table.dtype != DType::f16)
    throw DTypeError(name + ": embedding dtype " + dtype_name(table.dtype) + " is not f32, bf16 or f16");
}

void Embedding::lookup(const int32_t* ids, int64_t T, float* out, float scale) const {
  const int64_t D = dim();
  const size_t row_bytes = size_t(D) * dtype_size(table_.dtype);
  for (int64_t t = 0; t < T; ++t) {
    const uint8_t* row = static_cast<const uint8_t*>(table_.data) + size_t(ids[t]) * row_bytes;
    convert_to_f32(row, table_.dtype, out + t * D, size_t(D));
    if (scale != 1.f)
      for (int64_t k = 0; k < D; ++k) out[t * D + k] *= scale;
  }
}

}  // namespace attnzoo
