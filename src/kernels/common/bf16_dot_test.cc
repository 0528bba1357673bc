#include "kernels/common/bf16_dot.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/dispatch.h"

namespace attnzoo {
namespace {

// Every element lands at its transposed place, the padding columns are zero, nothing past them is written.
TEST(Bf16Dot, TransposePairsMovesEveryElementAndZeroPads) {
  if (!bf16_dot_enabled()) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  for (auto [rows, cols] : std::vector<std::pair<size_t, size_t>>{
           {16, 16}, {32, 48}, {17, 5}, {40, 37}, {3, 100}, {64, 129}, {1, 1}}) {
    const size_t ld_src = cols + 3, padded = (rows + 15) / 16 * 16, ld_dst = padded + 5;
    std::vector<uint32_t> src(rows * ld_src);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint32_t(i * 2654435761u + 7);
    const uint32_t sentinel = 0xdeadbeef;
    std::vector<uint32_t> dst(cols * ld_dst, sentinel);
    transpose_pairs(src.data(), ld_src, rows, cols, dst.data(), ld_dst);
    for (size_t c = 0; c < cols; ++c) {
      for (size_t r = 0; r < rows; ++r)
        ASSERT_EQ(dst[c * ld_dst + r], src[r * ld_src + c]) << rows << "x" << cols << " at r=" << r << " c=" << c;
      for (size_t r = rows; r < padded; ++r) ASSERT_EQ(dst[c * ld_dst + r], 0u) << "padding r=" << r;
      for (size_t r = padded; r < ld_dst; ++r) ASSERT_EQ(dst[c * ld_dst + r], sentinel) << "past the padding";
    }
  }
}

}  // namespace
}  // namespace attnzoo
