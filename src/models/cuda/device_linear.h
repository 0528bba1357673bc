#pragma once
// A projection whose weights live on a GPU, as gemm_cuda multiplies them: W [out, in] bf16 / f16 as the checkpoint
// stores it (f32 rounded to bf16 at load, counted for the one notice), bias f32 [out] or none.
#include <cstdint>
#include <span>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/linear.h"

namespace attnzoo {

// What rounding f32 checkpoints to bf16 cost, for the one notice at load.
struct WeightRounding {
  int64_t tensors = 0;
  uint64_t f32_bytes = 0;
};

// What building a model's device blocks needs: where, on which stream, the 16-bit dtype of the attention's
// activations (the cache's), and the rounding tally.
struct DeviceLoad {
  Device device;
  Stream stream;
  DType act_dtype = DType::bf16;
  WeightRounding* rounding = nullptr;
};

class DeviceLinear {
 public:
  DeviceLinear() = default;
  DeviceLinear(const Linear& l, const DeviceLoad& load);
  // Projections of one input stacked into one weight, their outputs side by side in y's row ([q|k|v],
  // [gate|up]): one GEMM reads x once. Biases concatenated (zeros for a part without one) and stored as
  // `bias_dtype`: y's dtype lets cuBLASLt add them (it takes a bias of y's type only). Only where `stackable`.
  DeviceLinear(std::span<const Linear* const> parts, const DeviceLoad& load, DType bias_dtype = DType::f32);
  // Whether `parts` can be stacked: one input width, dense weights that go up as one dtype.
  static bool stackable(std::span<const Linear* const> parts);
  // A bias-free projection over a bf16 / f16 [out, in] table already on the device and owned elsewhere (a tied
  // lm_head over the embedding's table: uploaded once).
  static DeviceLinear borrowing(const TensorView& w);

  int64_t out_features() const { return w_.shape[0]; }
  int64_t in_features() const { return w_.shape[1]; }
  DType weight_dtype() const { return w_.dtype; }
  // y [T, out] (=|+=) x [T, in] Wᵀ + bias, on `stream`.
  void apply(const TensorView& x, const TensorView& y, GemmOptions opts, Stream stream) const {
    gemm_cuda(x, w_, bias_.empty() ? nullptr : &bias_, y, opts, stream);
  }

 private:
  DeviceBuffer weight_, bias_bytes_;
  TensorView w_, bias_;
};

}  // namespace attnzoo
