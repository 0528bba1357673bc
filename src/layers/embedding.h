#pragma once
// Token embedding lookup from a borrowed [vocab, hidden] table (f32/bf16/f16), widened to f32 per row.
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace attnzoo {

class Embedding {
 public:
  Embedding() = default;
  Embedding(const TensorView& table, const std::string& name);
  int64_t vocab_size() const { return table_.shape[0]; }
  int64_t dim() const { return table_.shape[1]; }
  const TensorView& table() const { return table_; }
  // out [T, dim]; ids are validated by the caller (Model::forward) against vocab_size().
  void lookup(const int32_t* ids, int64_t T, float* out, float scale = 1.f) const;

 private:
  TensorView table_;
};

}  // namespace attnzoo
