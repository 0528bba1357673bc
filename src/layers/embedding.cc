#include "layers/embedding.h"

#include "core/error.h"

namespace attnzoo {

Embedding::Embedding(const TensorView& table, const std::string& name) {
  require(table.ndim == 2 && table.is_contiguous(), name.c_str(), "embedding must be 2-D [vocab, hidden], got " + table.shape_str());
  if (table.dtype != DType::f32 && table.dtype != DType::bf16 && table.dtype != DType::f16)
    throw DTypeError(name + ": embedding dtype " + dtype_name(table.dtype) + " is not f32, bf16 or f16");
  table_ = QuantMatrix{table.data, *quant_type_of(table.dtype), table.shape[0], table.shape[1],
                       table.shape[1] * int64_t(dtype_size(table.dtype))};
}

Embedding Embedding::from_quantized(const void* data, uint64_t nbytes, QuantType type, int64_t vocab, int64_t dim,
                                    const std::string& name) {
  Embedding e;
  e.table_ = make_quant_matrix(data, nbytes, type, vocab, dim, name);
  return e;
}

TensorView Embedding::table() const {
  require(!is_quantized(), "embedding", std::string("the table is block-quantized (") + quant_type_name(table_.type) + ")");
  return TensorView::contiguous(const_cast<void*>(table_.data), *dtype_of(table_.type), {table_.rows, table_.cols});
}

void Embedding::lookup(const int32_t* ids, int64_t T, float* out, float scale) const {
  const int64_t D = dim();
  for (int64_t t = 0; t < T; ++t) {
    dequantize_row(table_.type, table_.row(ids[t]), out + t * D, D);
    if (scale != 1.f)
      for (int64_t k = 0; k < D; ++k) out[t * D + k] *= scale;
  }
}

}  // namespace attnzoo
