#pragma once
// Scalars a projection's device weights absorb at load, so that no kernel applies them per step (Falcon-H1's muP
// multipliers, a logits multiplier): y = out_r * (W (in * x) + b) is (out_r * in * W) x + out_r * b, row r of W
// scaled by out_r * in and b by out_r. Folded in f32 before the one rounding to 16 bits, so the folded weight is as
// close to the exact product as the weight's own rounding allows. Only where the weights go up as 16-bit rows
// (dense, or GGUF formats expanded at load): GGUF blocks kept as stored keep their multipliers at run time.
// Plain C++, tested on every machine.
#include <cstdint>
#include <span>
#include <vector>

#include "core/quant_type.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

struct WeightFold {
  float in = 1.f;           // on the input: scales W, not its bias
  float out = 1.f;          // on the output: scales W's rows and the bias
  std::vector<float> rows;  // per output row on top of `out` (Mamba-2's in_proj multipliers), or empty
  static WeightFold input(float scale) { return {scale, 1.f, {}}; }
  static WeightFold output(float scale) { return {1.f, scale, {}}; }
  bool identity() const;
  float row_scale(int64_t r) const { return out * (rows.empty() ? 1.f : rows[size_t(r)]); }
};

// A branch's input and output multipliers (ParallelMixer's in_scale / out_scale) as its mixer's projections fold
// them: the input ones into every projection that reads the block's rows, the output one into the projection that
// adds into the residual stream.
struct MixerScales {
  float in = 1.f, out = 1.f;
};

// Whether a weight of `type` can take a fold (its device rows are made on the host from f32 values).
bool foldable(QuantType type);

// device_dense_rows (device_weights.h) with `fold` applied: row r's f32 values (a 16-bit row widened, a GGUF row
// dequantized) times fold.in * fold.row_scale(r), then rounded once to the device dtype (f16 stays f16, the rest
// bf16). The identity fold gives device_dense_rows' bytes. ArgumentError naming `name` for a type !foldable or
// rows of the wrong count.
std::vector<uint16_t> device_folded_rows(const QuantMatrix& w, const WeightFold& fold, const char* name);
// b [rows] times fold.row_scale(r): the bias, untouched by fold.in.
std::vector<float> folded_bias(std::span<const float> bias, const WeightFold& fold);

}  // namespace attnzoo
