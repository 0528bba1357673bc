#pragma once
// Token embedding lookup from a borrowed [vocab, hidden] table, widened to f32 per row: f32 / bf16 / f16, or rows
// of block-quantized GGUF blocks (each looked-up row dequantized).
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

class Embedding {
 public:
  Embedding() = default;
  Embedding(const TensorView& table, const std::string& name);
  // `nbytes` raw bytes of `type` holding [vocab, dim] (the GGUF loader's entry point); ArgumentError naming `name`
  // for an unsupported format or a size that does not fit.
  static Embedding from_quantized(const void* data, uint64_t nbytes, QuantType type, int64_t vocab, int64_t dim,
                                  const std::string& name);
  int64_t vocab_size() const { return table_.rows; }
  int64_t dim() const { return table_.cols; }
  const QuantMatrix& matrix() const { return table_; }
  bool is_quantized() const { return quant_is_blocked(table_.type); }
  // The dense table (f32 / bf16 / f16); ArgumentError for a block-quantized one.
  TensorView table() const;
  // out [T, dim]; ids are validated by the caller (Model::forward) against vocab_size().
  void lookup(const int32_t* ids, int64_t T, float* out, float scale = 1.f) const;

 private:
  QuantMatrix table_;
};

}  // namespace attnzoo
