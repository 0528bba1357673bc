#include "models/cuda/device_linear.h"

#include <cstring>
#include <vector>

#include "core/convert.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
DeviceLinear::DeviceLinear(const Linear& l, const DeviceLoad& load) {
  const QuantMatrix& m = l.matrix();  // F32 / BF16 / F16: check_decoder_runs_on_cuda refused the rest
  const int64_t out = m.rows, in = m.cols;
  weight_ = DeviceBuffer(load.device, size_t(out * in) * 2);
  std::vector<uint16_t> rows(size_t(out * in));
  for (int64_t r = 0; r < out; ++r) {
    uint16_t* dst = rows.data() + r * in;
    if (m.type == QuantType::F32)
      convert_from_f32(reinterpret_cast<const float*>(m.row(r)), dst, DType::bf16, size_t(in));
    else
      std::memcpy(dst, m.row(r), size_t(in) * 2);
  }
  if (m.type == QuantType::F32 && load.rounding) {
    ++load.rounding->tensors;
    load.rounding->f32_bytes += uint64_t(out * in) * 4;
  }
  // A copy from pageable memory returns once the bytes are staged, so `rows` may go on return.
  weight_.upload(rows.data(), weight_.bytes(), load.stream);
  w_ = device_view(load.device, weight_.data(), m.type == QuantType::F16 ? DType::f16 : DType::bf16, {out, in});
  if (l.has_bias()) {
    bias_bytes_ = DeviceBuffer(load.device, size_t(out) * sizeof(float));
    bias_bytes_.upload(l.bias().data(), bias_bytes_.bytes(), load.stream);
    bias_ = device_view(load.device, bias_bytes_.data(), DType::f32, {out});
  }
}
#endif

}  // namespace attnzoo
