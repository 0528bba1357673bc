#include "loader/fp8_blocks.h"

#include <algorithm>
#include <array>

#include "core/threads.h"

#include "loader/load_error.h"

namespace attnzoo {

Fp8Blocks read_fp8_blocks(const Config& c) {
  Fp8Blocks b;
  if (!c.has("quantization_config")) return b;
  const Config q = c.sub("quantization_config");
  const std::string method = q.get_string_or("quant_method", "");
  if (method != "fp8")
    throw LoadError(c.source() + ": key 'quantization_config.quant_method': '" + method + "' with F8_E4M3 weights; "
                    "only block-scaled fp8 (weight_scale_inv per block) is read");
  if (!q.has("weight_block_size")) return b;
  const std::vector<int64_t> size = q.get_int_list("weight_block_size");
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0 || size[0] > (int64_t(1) << 20) || size[1] > (int64_t(1) << 20))
    throw LoadError(c.source() + ": key 'quantization_config.weight_block_size': expected two positive block sizes");
  b.rows = size[0];
  b.cols = size[1];
  return b;
}

namespace {
// ceil(n / d) for n >= 0, d > 0, without n + d - 1 (which overflows for n near 2^63: shapes come from the file)
int64_t blocks_of(int64_t n, int64_t d) { return n / d + (n % d != 0); }
}  // namespace

std::vector<int64_t> fp8_scale_shape(int64_t rows, int64_t cols, Fp8Blocks b) {
  return {blocks_of(rows, b.rows), blocks_of(cols, b.cols)};
}

void dequantize_fp8_blocks(const uint8_t* w, const float* scale_inv, int64_t rows, int64_t cols, Fp8Blocks b, DType to,
                           uint8_t* out) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = f8e4m3_to_f32(uint8_t(i));
    return t;
  }();
  const int64_t scale_cols = blocks_of(cols, b.cols);
  // One task per row of blocks: a large checkpoint's weights are converted on every core.
  ThreadPool::global().parallel_for(blocks_of(rows, b.rows), [&](int64_t task, int) {
    const float* s = scale_inv + task * scale_cols;
    for (int64_t i = task * b.rows; i < std::min(rows, (task + 1) * b.rows); ++i)
      for (int64_t j = 0; j < cols; ++j) store_from_f32(out, to, i * cols + j, table[w[i * cols + j]] * s[j / b.cols]);
  });
}

}  // namespace attnzoo
