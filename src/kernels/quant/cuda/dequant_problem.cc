// The CUDA bf16 expansion's host side that needs no CUDA: the problem's checks (dequant_cuda.h) and the launch
// plan (dequant_launch.h), so every refusal names the argument on any machine.
#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/cuda/dequant_launch.h"

namespace attnzoo {

bool quant_dequant_cuda_supported(QuantType type) {
  switch (type) {
    case QuantType::Q8_0: case QuantType::Q4_0: case QuantType::Q4_1: case QuantType::Q4_K: case QuantType::Q5_K:
    case QuantType::Q6_K: return true;
    default: return false;
  }
}

QuantDequantProblem make_quant_dequant_cuda_problem(const QuantMatrix& w, Device w_device, const TensorView& y) {
  require(quant_dequant_cuda_supported(w.type), "w", [&] {
    return std::string("format ") + quant_type_name(w.type) +
           " has no CUDA dequantization (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K do)";
  });
  require(w_device.is_cuda(), "w", [&] { return "lives on " + w_device.str() + "; this CUDA kernel needs device memory"; });
  require(w.row_group == 0, "w", "rows regrouped for the CPU's VNNI decode (row_groups.h); the GPU reads GGUF rows");
  require(w.data != nullptr || w.rows * w.cols == 0, "w", "data is null");
  // Blocks of whole words are read a word at a time, the others (18, 34, 210 bytes) as 16-bit halves.
  const uintptr_t alignment = quant_type_info(uint32_t(w.type))->block_bytes % 4 == 0 ? 4 : 2;
  require(reinterpret_cast<uintptr_t>(w.data) % alignment == 0, "w", [&] {
    return "data must be " + std::to_string(alignment) + "-byte aligned on CUDA (" + quant_type_name(w.type) + " blocks)";
  });
  const std::optional<int64_t> row_bytes = quant_row_bytes(w.type, w.cols);
  require(row_bytes && *row_bytes == w.row_bytes, "w", [&] {
    return "row_bytes " + std::to_string(w.row_bytes) + " is not " + quant_type_name(w.type) + "'s for " +
           std::to_string(w.cols) + " columns";
  });
  require(y.device == w_device, "y", [&] {
    return "lives on " + y.device.str() + ", the weight on " + w_device.str() + "; the CUDA dequantization needs both there";
  });
  if (y.dtype != DType::bf16) throw DTypeError(std::string("y: takes bfloat16, got ") + dtype_name(y.dtype));
  require(y.ndim == 2 && y.shape[0] == w.rows && y.shape[1] == w.cols && y.is_contiguous(), "y", [&] {
    return "must be [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] contiguous, got " + y.shape_str();
  });
  require(y.data != nullptr || w.rows * w.cols == 0, "y", "data is null");
  require(reinterpret_cast<uintptr_t>(y.data) % 4 == 0, "y", "data must be 4-byte aligned on CUDA (pairs are stored)");
  const uintptr_t y0 = reinterpret_cast<uintptr_t>(y.data), w0 = reinterpret_cast<uintptr_t>(w.data);
  const uintptr_t y1 = y0 + uintptr_t(w.rows * w.cols * 2), w1 = w0 + uintptr_t(w.bytes());
  require(!(y0 < w1 && w0 < y1) || w.rows * w.cols == 0, "y", "overlaps w");

  QuantDequantProblem p;
  p.device = w_device;
  p.type = w.type;
  p.rows = w.rows, p.cols = w.cols;
  p.w = w.data;
  p.w_row_bytes = w.row_bytes;
  p.y = y.data;
  return p;
}

namespace cuda_quant {

DequantLaunch plan_quant_dequant(const QuantDequantProblem& p) {
  DequantLaunch l;
  if (p.rows == 0 || p.cols == 0) return l;
  l.empty = false;
  l.type = p.type;
  l.params = {static_cast<const unsigned char*>(p.w), p.w_row_bytes, p.y, p.rows, p.cols};
  const int64_t quads = p.rows * (p.cols / 4);
  l.grid = unsigned(std::min(kDequantMaxBlocks, (quads + kDequantThreads - 1) / kDequantThreads));
  return l;
}

}  // namespace cuda_quant
}  // namespace attnzoo
