#pragma once
// A projection whose weights live on a GPU, kept as device_weights.h chooses: W [out, in] bf16 / f16 as gemm_cuda
// multiplies it (f32 rounded to bf16 and GGUF formats no kernel reads expanded to bf16 at load, both counted for
// the notices), or GGUF blocks as the file stores them, multiplied by the quantized GEMV (steps of up to 8 rows)
// or expanded slice by slice into a shared bf16 panel for gemm_cuda (longer steps). Bias f32 [out] (a stacked
// dense one may be kept in y's 16-bit dtype) or none. Every path takes x bf16 / f16 / f32 (the runner hands it
// bf16 normed rows) and writes y in the dtype the caller gives.
#include <cstdint>
#include <memory>
#include <span>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/quant/quant.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "models/cuda/device_weight_fold.h"
#include "models/cuda/device_weights.h"

namespace attnzoo {

// The bf16 panel every GGUF projection of a model expands its blocks into for a long step (the layers run one
// after another on one stream). Sized at load for the largest slice, so a step allocates nothing.
struct DequantPanel {
  Device device;
  DeviceBuffer buffer;
  void reserve(size_t bytes) {
    if (buffer.bytes() < bytes) buffer = DeviceBuffer(device, bytes);
  }
};

// What building a model's device blocks needs: where, on which stream, the 16-bit dtype of the attention's
// activations (the cache's), the tally for the load notices, and the shared panel (made on first need when null).
struct DeviceLoad {
  Device device;
  Stream stream;
  DType act_dtype = DType::bf16;
  WeightRounding* rounding = nullptr;
  std::shared_ptr<DequantPanel> panel;
};

class DeviceLinear {
 public:
  DeviceLinear() = default;
  // `fold`: multipliers the weights absorb (device_weight_fold.h; only where `foldable` unless the identity).
  DeviceLinear(const Linear& l, const DeviceLoad& load, const WeightFold& fold = {});
  // Projections of one input stacked into one weight, their outputs side by side in y's row ([q|k|v],
  // [gate|up]): one GEMM reads x once. Biases concatenated (zeros for a part without one) and stored as
  // `bias_dtype`: y's dtype lets cuBLASLt add them (it takes a bias of y's type only). Only where `stackable`.
  // `folds`: one per part, or none.
  DeviceLinear(std::span<const Linear* const> parts, const DeviceLoad& load, DType bias_dtype = DType::f32,
               std::span<const WeightFold> folds = {});
  // Whether `parts` can be stacked: one input width, dense weights that go up as one dtype.
  static bool stackable(std::span<const Linear* const> parts);
  // A bias-free projection over a bf16 / f16 [out, in] table already on the device and owned elsewhere (a tied
  // lm_head over the embedding's table: uploaded once).
  static DeviceLinear borrowing(const TensorView& w);

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  DeviceWeights weights() const { return kind_; }
  // y [T, out] (=|+=) x [T, in] Wᵀ + bias, on `stream`.
  void apply(const TensorView& x, const TensorView& y, GemmOptions opts, Stream stream) const;
  // y += x Wᵀ + bias: a block's last projection, added into the residual stream.
  void apply_add(const TensorView& x, const TensorView& y, Stream stream) const {
    GemmOptions add_into;
    add_into.accumulate = true;
    apply(x, y, add_into, stream);
  }

 private:
  void apply_panels(const TensorView& x, const TensorView& y, GemmOptions opts, Stream stream) const;

  DeviceWeights kind_ = DeviceWeights::dense;
  int64_t out_ = 0, in_ = 0;
  Device device_;
  DeviceBuffer weight_, bias_bytes_;
  TensorView w_, bias_;                  // w_: dense and expanded weights
  QuantMatrix blocks_;                   // blocks: GGUF rows on the device
  std::shared_ptr<DequantPanel> panel_;  // blocks
  int64_t panel_rows_ = 0;
};

// The token table on the device: as stored where the CUDA gather reads its format, else (Q4_1, Q5_0, Q5_K, ...)
// expanded to bf16 at load, counted with the projections for the notice.
EmbeddingCuda make_device_embedding(const Embedding& embed, const DeviceLoad& load);

}  // namespace attnzoo
