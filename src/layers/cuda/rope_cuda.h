#pragma once
// Rotary position embedding on an NVIDIA GPU, the twin of layers/rope.h: the same inverse frequencies and attention
// factor (taken from a Rope, so every rope type it supports comes along), both layouts, partial rotary, in place on
// q and k [tokens, heads, head_dim] (any token and head strides: q and k may be slices of one fused qkv row), f32
// math on f32 / bf16 / f16 data. Angles are rounded to f32 (position * inv_freq) and their cos / sin taken in
// double, as Rope::angles does, so the two agree to the rounding of the rotation itself.
#include "core/device.h"
#include "core/tensor.h"
#include "layers/rope.h"

namespace attnzoo {

// Every refusal of RopeCuda::apply, before any CUDA call (so it needs no GPU): q (and k unless empty)
// [tokens, heads, head_dim] of one float dtype with a unit last stride, positions int32 / int64 [tokens]
// contiguous, all on `device`; rotary_dim at most 8192. ArgumentError / DTypeError naming the argument.
void check_rope_cuda(const Rope& rope, Device device, const TensorView& q, const TensorView& k,
                     const TensorView& positions);

class RopeCuda {
 public:
  RopeCuda() = default;
  // Uploads the rope's inverse frequencies to `device` once (ordered on `stream`): a step then does no host work.
  RopeCuda(const Rope& rope, Device device, Stream stream = current_stream());

  const Rope& rope() const { return rope_; }

  // check_rope_cuda for this object's rope and device.
  void check(const TensorView& q, const TensorView& k, const TensorView& positions) const;
  // Rotates q and (unless k is empty) k in place, token t at positions[t]. Checks first; rope.cu, CUDA builds only.
  void apply(const TensorView& q, const TensorView& k, const TensorView& positions,
             Stream stream = current_stream()) const;

 private:
  Rope rope_;  // its geometry, for check()
  DeviceBuffer inv_freq_;  // f32 [rotary_dim / 2]
  Device device_{};
};

}  // namespace attnzoo
