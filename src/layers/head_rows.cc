#include "layers/head_rows.h"

#include <string>

#include "core/error.h"

namespace attnzoo {
namespace {

void require_heads_tensor(const TensorView& t, const char* name) {
  require(t.ndim == 3, name, "must be [rows, heads, cols]");
  if (t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw DTypeError(std::string(name) + ": takes bfloat16 or float16, got " + dtype_name(t.dtype));
  require(t.stride(2) == 1, name, "needs a contiguous last dimension");
  require(t.stride(0) >= 0 && t.stride(1) >= 0, name, "needs non-negative strides");
}

}  // namespace

void check_head_row_copy(const HeadRowCopy& c, const Device* device) {
  require_heads_tensor(c.src, "src");
  require_heads_tensor(c.dst, "dst");
  if (device) {
    require(c.src.device == *device, "src", "must live on the launch's device");
    require(c.dst.device == *device, "dst", "must live on the launch's device");
  }
  if (c.dst.dtype != c.src.dtype)
    throw DTypeError(std::string("dst: is ") + dtype_name(c.dst.dtype) + ", src " + dtype_name(c.src.dtype));
  const int64_t heads = c.dst.shape[1];
  require(c.src.shape[1] == heads || c.src.shape[1] == 1, "src", [&] {
    return "has " + std::to_string(c.src.shape[1]) + " heads, dst " + std::to_string(heads) + " (or 1 to broadcast)";
  });
  require(c.dst.shape[2] >= c.src.shape[2], "dst", [&] {
    return "is " + std::to_string(c.dst.shape[2]) + " wide, narrower than src's " + std::to_string(c.src.shape[2]);
  });
  require(c.rows >= 0, "rows", "must not be negative");
  require(c.src_rows || c.rows <= c.src.shape[0], "src",
          [&] { return "has " + std::to_string(c.src.shape[0]) + " rows, " + std::to_string(c.rows) + " copied"; });
  require(c.dst_rows || c.rows <= c.dst.shape[0], "dst",
          [&] { return "has " + std::to_string(c.dst.shape[0]) + " rows, " + std::to_string(c.rows) + " copied"; });
}

void copy_head_rows(const HeadRowCopy& c) {
  check_head_row_copy(c, nullptr);
  require(c.src.device.is_cpu() && c.dst.device.is_cpu(), "src", "the host copy reads and writes CPU memory");
  const int64_t heads = c.dst.shape[1], cols = c.src.shape[2], width = c.dst.shape[2];
  const int64_t src_head = c.src.shape[1] == 1 ? 0 : c.src.stride(1);
  const auto* src = static_cast<const uint16_t*>(c.src.data);
  auto* dst = static_cast<uint16_t*>(c.dst.data);
  for (int64_t r = 0; r < c.rows; ++r) {
    const int64_t from = c.src_rows ? c.src_rows[r] : r, to = c.dst_rows ? c.dst_rows[r] : r;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < width; ++j)
        dst[to * c.dst.stride(0) + h * c.dst.stride(1) + j] =
            j < cols ? src[from * c.src.stride(0) + h * src_head + j] : uint16_t(0);
  }
}

}  // namespace attnzoo
