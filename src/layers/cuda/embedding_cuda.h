#pragma once
// The token embedding gather on an NVIDIA GPU, the twin of layers/embedding.h: int32 ids [T] (host or device) in,
// rows [T, dim] (f32 or bf16, any row stride) out, each the table row the CPU's Embedding::lookup gives, bit for
// bit: dense f32 / bf16 / f16 tables widened, GGUF Q8_0 / Q4_0 / Q4_K / Q6_K rows dequantized by
// dequant_reference.cc's f32 operations in its order (no contraction), then times `scale` (Gemma's sqrt(hidden)),
// then rounded to nearest even for a bf16 output.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

class Embedding;

// Whether the CUDA gather reads tables of `type` (F32, BF16, F16, Q8_0, Q4_0, Q4_K, Q6_K).
bool embedding_type_supported_cuda(QuantType type);

// The table's refusals, before anything is uploaded: a supported type, rows not regrouped. ArgumentError naming
// "embedding".
void check_embedding_table_cuda(const QuantMatrix& table);

// Every refusal of a lookup before any CUDA call: ids int32 [T] contiguous, on the host or on `device`; out f32 /
// bf16 [T, table.cols] with a contiguous last dimension on `device`; scale finite. Ids on the host are checked here
// against the vocabulary ("ids: entry t = id is outside the vocabulary [0, V)"); ids on the device by the kernel.
// ArgumentError / DTypeError naming the argument.
void check_embedding_lookup_cuda(const QuantMatrix& table, Device device, const TensorView& ids,
                                 const TensorView& out, float scale);

// An Embedding's table uploaded to one GPU once (its bytes as stored: a quantized table stays quantized there).
class EmbeddingCuda {
 public:
  EmbeddingCuda() = default;
  EmbeddingCuda(const Embedding& embedding, Device device, Stream stream = current_stream());

  int64_t vocab_size() const { return table_.rows; }
  int64_t dim() const { return table_.cols; }
  QuantType type() const { return table_.type; }
  // The table as uploaded (data on the device): a tied output head multiplies by it rather than upload it again.
  const QuantMatrix& table() const { return table_; }

  // out = table[ids] * scale. Device ids outside the vocabulary: with check_ids, an ArgumentError naming ids
  // after the kernel (the lookup reads a status back, so it synchronises the stream); without (a model step's),
  // their rows are NaN, never a read outside the table. CUDA builds only (embedding.cu).
  void lookup(const TensorView& ids, const TensorView& out, float scale = 1.f, bool check_ids = true,
              Stream stream = current_stream()) const;

 private:
  DeviceBuffer bytes_;
  QuantMatrix table_;  // data: bytes_ on the device
  Device device_;
};

}  // namespace attnzoo
