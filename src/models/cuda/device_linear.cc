#include "models/cuda/device_linear.h"

#include <array>
#include <cstring>
#include <vector>

#include "core/convert.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// The 16-bit dtype a dense weight goes up as: f16 stays, f32 is rounded to bf16.
DType device_dtype(QuantType t) { return t == QuantType::F16 ? DType::f16 : DType::bf16; }

}  // namespace

DeviceLinear::DeviceLinear(const Linear& l, const DeviceLoad& load)
    : DeviceLinear(std::array<const Linear*, 1>{&l}, load) {}

bool DeviceLinear::stackable(std::span<const Linear* const> parts) {
  for (const Linear* l : parts) {
    const QuantType t = l->matrix().type;
    if (t != QuantType::F32 && t != QuantType::BF16 && t != QuantType::F16) return false;
    if (l->matrix().cols != parts[0]->matrix().cols || device_dtype(t) != device_dtype(parts[0]->matrix().type))
      return false;
  }
  return !parts.empty();
}

DeviceLinear::DeviceLinear(std::span<const Linear* const> parts, const DeviceLoad& load, DType bias_dtype) {
  // F32 / BF16 / F16 (check_decoder_runs_on_cuda refused the rest), one input width and dtype (stackable)
  const int64_t in = parts[0]->matrix().cols;
  int64_t out = 0;
  bool any_bias = false;
  for (const Linear* l : parts) {
    out += l->matrix().rows;
    any_bias = any_bias || l->has_bias();
  }
  weight_ = DeviceBuffer(load.device, size_t(out * in) * 2);
  std::vector<uint16_t> rows(size_t(out * in));
  std::vector<float> bias(any_bias ? size_t(out) : 0, 0.f);
  int64_t at = 0;
  for (const Linear* l : parts) {
    const QuantMatrix& m = l->matrix();
    for (int64_t r = 0; r < m.rows; ++r) {
      uint16_t* dst = rows.data() + (at + r) * in;
      if (m.type == QuantType::F32)
        convert_from_f32(reinterpret_cast<const float*>(m.row(r)), dst, DType::bf16, size_t(in));
      else
        std::memcpy(dst, m.row(r), size_t(in) * 2);
    }
    if (l->has_bias()) std::memcpy(bias.data() + at, l->bias().data(), size_t(m.rows) * sizeof(float));
    if (m.type == QuantType::F32 && load.rounding) {
      ++load.rounding->tensors;
      load.rounding->f32_bytes += uint64_t(m.rows * in) * 4;
    }
    at += m.rows;
  }
  // A copy from pageable memory returns once the bytes are staged, so `rows` may go on return.
  weight_.upload(rows.data(), weight_.bytes(), load.stream);
  w_ = device_view(load.device, weight_.data(), device_dtype(parts[0]->matrix().type), {out, in});
  if (any_bias) {
    std::vector<uint8_t> bytes(size_t(out) * dtype_size(bias_dtype));
    if (bias_dtype == DType::f32)
      std::memcpy(bytes.data(), bias.data(), bytes.size());
    else
      convert_from_f32(bias.data(), bytes.data(), bias_dtype, size_t(out));
    bias_bytes_ = DeviceBuffer(load.device, bytes.size());
    bias_bytes_.upload(bytes.data(), bytes.size(), load.stream);
    bias_ = device_view(load.device, bias_bytes_.data(), bias_dtype, {out});
  }
}

DeviceLinear DeviceLinear::borrowing(const TensorView& w) {
  DeviceLinear d;
  d.w_ = w;
  return d;
}
#endif

}  // namespace attnzoo
