// The CUDA quantized GEMV's host side that needs no CUDA: the problem's checks (gemv_cuda.h) and the launch plan
// (gemv_launch.h), so every refusal is an error naming the argument on any machine, and the emulator's cases run
// the plan the launcher runs.
#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "kernels/quant/cuda/gemv_cuda.h"
#include "kernels/quant/cuda/gemv_launch.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// [first byte, one past the last) of `rows` rows of `cols` elements, `stride` elements apart.
struct Extent {
  uintptr_t begin, end;
};
Extent extent(const void* data, int64_t rows, int64_t cols, int64_t stride, size_t elem) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(data);
  return {b, rows * cols == 0 ? b : b + uintptr_t(((rows - 1) * stride + cols) * int64_t(elem))};
}
bool overlap(Extent a, Extent b) { return a.begin < b.end && b.begin < a.end; }

void require_on(const TensorView& t, const char* name, Device device) {
  require(t.device == device, name, [&] {
    return "lives on " + t.device.str() + ", the weight on " + device.str() + "; the CUDA GEMV needs both there";
  });
}

// 2-D with contiguous rows; returns the row stride in elements.
int64_t row_stride(const TensorView& t, const char* name, int64_t rows, int64_t cols) {
  require(t.ndim == 2 && t.shape[0] == rows && t.shape[1] == cols, name,
          [&] { return "must be [" + str(rows) + ", " + str(cols) + "], got " + t.shape_str(); });
  require(t.strides[1] == 1 || cols <= 1, name,
          [&] { return "rows must be contiguous (last stride 1), got stride " + str(t.strides[1]); });
  require(t.strides[0] >= cols || rows <= 1, name,
          [&] { return "rows must not overlap: stride " + str(t.strides[0]) + " < " + str(cols); });
  return rows <= 1 ? cols : t.strides[0];
}

}  // namespace

bool quant_gemv_cuda_supported(QuantType type) {
  switch (type) {
    case QuantType::BF16: case QuantType::F16: case QuantType::Q8_0: case QuantType::Q4_0: case QuantType::Q4_1:
    case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K: return true;
    default: return false;
  }
}

QuantGemvProblem make_quant_gemv_cuda_problem(const QuantMatrix& w, Device w_device, const TensorView& x,
                                              const TensorView& y, const QuantGemvEpilogue& epilogue) {
  require(quant_gemv_cuda_supported(w.type), "w", [&] {
    return std::string("format ") + quant_type_name(w.type) +
           " has no CUDA GEMV (BF16, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K do)";
  });
  require(w_device.is_cuda(), "w", [&] { return "lives on " + w_device.str() + "; this CUDA kernel needs device memory"; });
  require(w.row_group == 0, "w", "rows regrouped for the CPU's VNNI decode (row_groups.h); the GPU reads GGUF rows");
  require(w.data != nullptr || w.rows * w.cols == 0, "w", "data is null");
  require(reinterpret_cast<uintptr_t>(w.data) % 2 == 0, "w", "data must be 2-byte aligned on CUDA (blocks start on even bytes)");
  require(quant_is_blocked(w.type) || w.cols % 32 == 0, "w", [&] {
    return std::string(quant_type_name(w.type)) + " rows of " + str(w.cols) +
           " columns; the CUDA GEMV walks them 32 at a time (a multiple of 32)";
  });
  const std::optional<int64_t> row_bytes = quant_row_bytes(w.type, w.cols);
  require(row_bytes && *row_bytes == w.row_bytes, "w", [&] {
    return "row_bytes " + str(w.row_bytes) + " is not " + std::string(quant_type_name(w.type)) + "'s for " +
           str(w.cols) + " columns";
  });

  require_on(x, "x", w_device);
  require_on(y, "y", w_device);
  auto float_dtype = [](DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; };
  if (!float_dtype(x.dtype))
    throw DTypeError(std::string("x: takes float32, bfloat16 or float16, got ") + dtype_name(x.dtype));
  if (!float_dtype(y.dtype))
    throw DTypeError(std::string("y: takes float32, bfloat16 or float16, got ") + dtype_name(y.dtype));
  require(x.ndim == 2, "x", [&] { return "must be [M, K] (2-D), got " + x.shape_str(); });
  const int64_t M = x.shape[0];
  require(M >= 0 && M <= kQuantGemvMaxRows, "x", [&] {
    return "M=" + str(M) + " rows; the CUDA GEMV takes 1 to " + str(kQuantGemvMaxRows) + " (a decode step's batch)";
  });

  QuantGemvProblem p;
  p.device = w_device;
  p.type = w.type;
  p.M = M, p.N = w.rows, p.K = w.cols;
  p.w = w.data;
  p.w_row_bytes = w.row_bytes;
  p.x = x.data;
  p.x_dtype = x.dtype;
  p.x_stride = row_stride(x, "x", M, w.cols);
  p.y = y.data;
  p.y_dtype = y.dtype;
  p.y_stride = row_stride(y, "y", M, w.rows);
  p.accumulate = epilogue.accumulate;
  if (const TensorView* b = epilogue.bias) {
    require_on(*b, "bias", w_device);
    if (b->dtype != DType::f32) throw DTypeError(std::string("bias: takes float32, got ") + dtype_name(b->dtype));
    require(b->ndim == 1 && b->shape[0] == w.rows && (b->strides[0] == 1 || w.rows <= 1), "bias",
            [&] { return "must be [" + str(w.rows) + "] contiguous, got " + b->shape_str(); });
    require(b->data != nullptr || w.rows == 0, "bias", "data is null");
    require(reinterpret_cast<uintptr_t>(b->data) % 4 == 0, "bias", "data must be aligned to its element size on CUDA");
    p.bias = static_cast<const float*>(b->data);
  }
  require(reinterpret_cast<uintptr_t>(x.data) % dtype_size(x.dtype) == 0, "x",
          "data must be aligned to its element size on CUDA");
  require(reinterpret_cast<uintptr_t>(y.data) % dtype_size(y.dtype) == 0, "y",
          "data must be aligned to its element size on CUDA");
  require((x.data != nullptr && y.data != nullptr) || M * w.rows == 0, "x", "data is null");
  // Every block reads all of x and its rows of w until its last tile; y is written at the end, so a y over
  // either would be read after another block wrote it.
  const Extent y_bytes = extent(p.y, M, p.N, p.y_stride, dtype_size(p.y_dtype));
  require(!overlap(y_bytes, extent(p.x, M, p.K, p.x_stride, dtype_size(p.x_dtype))), "y", "overlaps x");
  require(!overlap(y_bytes, extent(p.w, p.N, p.w_row_bytes, p.w_row_bytes, 1)), "y", "overlaps w");
  const int64_t blocks = (w.rows + cuda_quant::kRowsPerBlock - 1) / cuda_quant::kRowsPerBlock;
  require(blocks <= INT_MAX, "w", [&] {
    return "ceil(rows / " + str(cuda_quant::kRowsPerBlock) + ") = " + str(blocks) + " thread blocks exceed the grid's 2^31 - 1";
  });
  return p;
}

namespace cuda_quant {

BlockShape block_shape(QuantType type) {
  switch (type) {
    case QuantType::BF16: case QuantType::F16: return {32, 64};
    default: {
      const QuantTypeInfo info = *quant_type_info(uint32_t(type));
      return {int(info.block_elems), int(info.block_bytes)};
    }
  }
}

GemvLaunch plan_quant_gemv(const QuantGemvProblem& p) {
  GemvLaunch l;
  if (p.M == 0 || p.N == 0) return l;
  l.empty = false;
  l.type = p.type;
  l.rows_bucket = p.M <= 1 ? 1 : p.M <= 2 ? 2 : p.M <= 4 ? 4 : 8;
  Params& k = l.params;
  k.w = static_cast<const unsigned char*>(p.w);
  k.w_row_bytes = p.w_row_bytes;
  k.x = p.x;
  k.x_dtype = p.x_dtype;
  k.x_stride = p.x_stride;
  k.y = p.y;
  k.y_dtype = p.y_dtype;
  k.y_stride = p.y_stride;
  k.bias = p.bias;
  k.accumulate = p.accumulate;
  k.M = int(p.M);
  k.N = p.N, k.K = p.K;
  // The widest load that divides both w's base and its row length: every row and tile start then keeps it.
  const uint64_t alignment = uint64_t(reinterpret_cast<uintptr_t>(p.w)) | uint64_t(p.w_row_bytes);
  k.w_load_bytes = alignment % 16 == 0 ? 16 : alignment % 4 == 0 ? 4 : 2;
  k.x_async = p.x_dtype == DType::f32 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && (p.M <= 1 || p.x_stride % 4 == 0);
  l.grid = unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock);
  l.smem_bytes = 2 * (size_t(l.rows_bucket) * kTileElems * sizeof(float) + size_t(kRowsPerBlock) * size_t(tile_bytes(p.type)));
  return l;
}

}  // namespace cuda_quant
}  // namespace attnzoo
