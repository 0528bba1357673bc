#include "models/cuda/device_weights.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/cuda/gemv_cuda.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {

DeviceWeights device_weights(QuantType type) {
  if (type == QuantType::F32 || type == QuantType::BF16 || type == QuantType::F16) return DeviceWeights::dense;
  // Both kernels, or the long steps would have nothing to multiply with.
  if (quant_gemv_cuda_supported(type) && quant_dequant_cuda_supported(type)) return DeviceWeights::blocks;
  return DeviceWeights::expanded;
}

DeviceProduct device_product(DeviceWeights w, int64_t rows) {
  if (w != DeviceWeights::blocks) return DeviceProduct::gemm;
  return rows <= kQuantGemvMaxRows ? DeviceProduct::gemv : DeviceProduct::dequant_gemm;
}

std::vector<uint8_t> device_gguf_rows(const QuantMatrix& w) {
  std::vector<uint8_t> rows(static_cast<size_t>(w.bytes()));
  AlignedBuffer<uint8_t> scratch;
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(rows.data() + r * w.row_bytes, row_of_group(w, r, scratch), size_t(w.row_bytes));
  return rows;
}

std::vector<uint16_t> device_dense_rows(const QuantMatrix& w) {
  const int64_t in = w.cols;
  std::vector<uint16_t> rows(static_cast<size_t>(w.rows * in));
  std::vector<float> f32(static_cast<size_t>(in));
  for (int64_t r = 0; r < w.rows; ++r) {
    uint16_t* dst = rows.data() + r * in;
    if (w.type == QuantType::BF16 || w.type == QuantType::F16) {
      std::memcpy(dst, w.row(r), size_t(in) * 2);
      continue;
    }
    const float* src = reinterpret_cast<const float*>(w.row(r));
    if (w.type != QuantType::F32) {
      dequantize_rows(w, r, 1, f32.data());  // the reference's values; regrouped rows read back as GGUF rows
      src = f32.data();
    }
    convert_from_f32(src, dst, DType::bf16, size_t(in));
  }
  return rows;
}

int64_t dequant_panel_rows(int64_t rows, int64_t cols) {
  // Slices of whole 64-row groups keep every slice's outputs as aligned as the first's.
  const int64_t fit = int64_t(kDequantPanelMaxBytes / size_t(std::max<int64_t>(cols, 1) * 2));
  return std::max<int64_t>(1, std::min(rows, std::max<int64_t>(64, fit / 64 * 64)));
}

void WeightRounding::count_expanded(QuantType type, uint64_t gguf_bytes, uint64_t bf16_bytes) {
  ++expanded;
  expanded_gguf_bytes += gguf_bytes;
  expanded_bf16_bytes += bf16_bytes;
  const std::string name = quant_type_name(type);
  const std::string listed = ", " + expanded_formats + ", ";
  if (listed.find(", " + name + ", ") == std::string::npos)
    expanded_formats += (expanded_formats.empty() ? "" : ", ") + name;
}

std::string expansion_notice(const WeightRounding& r, const std::string& device) {
  if (r.expanded == 0) return "";
  char line[512];
  std::snprintf(line, sizeof line,
                "attnzoo: %lld GGUF weight tensors (%s) expanded to bf16 at load for %s, which has no kernel for "
                "their blocks: %.1f MiB there instead of %.1f\n",
                static_cast<long long>(r.expanded), r.expanded_formats.c_str(), device.c_str(),
                double(r.expanded_bf16_bytes) / (1 << 20), double(r.expanded_gguf_bytes) / (1 << 20));
  return line;
}

std::string panel_notice(size_t panel_bytes, const std::string& device) {
  if (panel_bytes == 0) return "";
  char line[256];
  std::snprintf(line, sizeof line,
                "attnzoo: %.1f MiB on %s for the bf16 panel GGUF projections expand into for steps of more than %lld "
                "rows\n",
                double(panel_bytes) / (1 << 20), device.c_str(), static_cast<long long>(kQuantGemvMaxRows));
  return line;
}

}  // namespace attnzoo
