#include "models/cuda/device_weight_fold.h"

#include <algorithm>
#include <string>

#include "core/convert.h"
#include "core/error.h"
#include "models/cuda/device_weights.h"

namespace attnzoo {

bool WeightFold::identity() const {
  if (in != 1.f || out != 1.f) return false;
  for (float r : rows)
    if (r != 1.f) return false;
  return true;
}

bool foldable(QuantType type) { return device_weights(type) != DeviceWeights::blocks; }

std::vector<uint16_t> device_folded_rows(const QuantMatrix& w, const WeightFold& fold, const char* name) {
  require(foldable(w.type), name, [&] {
    return std::string("weights kept as ") + quant_type_name(w.type) + " blocks on the device cannot take a multiplier";
  });
  require(fold.rows.empty() || int64_t(fold.rows.size()) == w.rows, name, [&] {
    return "a multiplier per output row needs " + std::to_string(w.rows) + " of them, got " +
           std::to_string(fold.rows.size());
  });
  if (fold.identity()) return device_dense_rows(w);
  // Scaled from the stored values, not from the device row widened back: an f32 or GGUF row is rounded once.
  const DType device = w.type == QuantType::F16 ? DType::f16 : DType::bf16;
  const int64_t in = w.cols;
  std::vector<uint16_t> rows(size_t(w.rows * in));
  std::vector<float> f32(static_cast<size_t>(in));
  for (int64_t r = 0; r < w.rows; ++r) {
    uint16_t* dst = rows.data() + r * in;
    if (w.type == QuantType::F32) {
      std::copy_n(reinterpret_cast<const float*>(w.row(r)), in, f32.data());
    } else if (w.type == QuantType::BF16 || w.type == QuantType::F16) {
      convert_to_f32(w.row(r), device, f32.data(), size_t(in));
    } else {
      dequantize_rows(w, r, 1, f32.data());  // as device_dense_rows: regrouped rows read back as GGUF rows
    }
    const float s = fold.in * fold.row_scale(r);
    for (float& v : f32) v *= s;
    convert_from_f32(f32.data(), dst, device, size_t(in));
  }
  return rows;
}

std::vector<float> folded_bias(std::span<const float> bias, const WeightFold& fold) {
  std::vector<float> b(bias.begin(), bias.end());
  for (size_t r = 0; r < b.size(); ++r) b[r] *= fold.row_scale(int64_t(r));
  return b;
}

}  // namespace attnzoo
