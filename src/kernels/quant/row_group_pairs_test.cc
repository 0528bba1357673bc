// Regrouped rows decoded straight into bf16 pairs (row_group_pairs.h) are the reference dequantization rounded to
// nearest even, bit for bit, for any range of whole runs of four rows; anything else is refused untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/bf16_dot.h"
#include "core/dtype.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_group_pairs.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {

// raw's N x K rows regrouped and converted over several ranges of rows, each against the reference's f32 rounded
// by f32_to_bf16 (the plain C++ statement of round to nearest even), rows `stride` apart with the gap untouched.
void expect_reference_pairs(QuantType t, const std::vector<uint8_t>& raw, int64_t N, int64_t K) {
  const int64_t K2 = K / 2;
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
  std::vector<uint8_t> regrouped(raw.size());
  const QuantMatrix g = to_row_groups(w, regrouped.data());
  std::vector<float> f(static_cast<size_t>(K));
  std::vector<uint32_t> want(size_t(N * K2));
  for (int64_t r = 0; r < N; ++r) {
    dequantize_row_reference(t, w.row(r), f.data(), K);
    for (int64_t k = 0; k < K2; ++k)
      want[size_t(r * K2 + k)] =
          uint32_t(f32_to_bf16(f[size_t(2 * k)])) | uint32_t(f32_to_bf16(f[size_t(2 * k + 1)])) << 16;
  }
  const size_t stride = size_t(K2) + 5;  // rows apart by more than K / 2 pairs: the gap stays untouched
  for (const auto& [r0, nr] : {std::pair<int64_t, int64_t>{0, N}, {16, 32}, {4, 8}, {20, 28}, {44, 4}}) {
    if (r0 + nr > N) continue;
    std::vector<uint32_t> got(size_t(nr) * stride, 0xDEADBEEFu);
    ASSERT_TRUE(row_group_pairs(g, r0, nr, got.data(), stride)) << quant_type_name(t) << " rows " << r0 << " + " << nr;
    for (int64_t r = 0; r < nr; ++r) {
      for (int64_t k = 0; k < K2; ++k)
        if (want[size_t((r0 + r) * K2 + k)] != got[size_t(r) * stride + size_t(k)]) {
          ADD_FAILURE() << quant_type_name(t) << " row " << r0 + r << " pair " << k << " (elements " << 2 * k << ", "
                        << 2 * k + 1 << ") of rows " << r0 << " + " << nr << ": " << std::hex
                        << got[size_t(r) * stride + size_t(k)] << " for " << want[size_t((r0 + r) * K2 + k)];
          break;  // one report per row
        }
      for (size_t k = size_t(K2); k < stride; ++k) EXPECT_EQ(got[size_t(r) * stride + k], 0xDEADBEEFu);
    }
  }
  // Not whole runs of four, GGUF rows: refused, nothing written (the caller takes dequantize_rows).
  std::vector<uint32_t> got(size_t(N) * stride, 0xDEADBEEFu);
  EXPECT_FALSE(row_group_pairs(g, 2, 8, got.data(), stride));
  EXPECT_FALSE(row_group_pairs(g, 0, 6, got.data(), stride));
  EXPECT_FALSE(row_group_pairs(w, 0, 16, got.data(), stride));
  for (uint32_t v : got) ASSERT_EQ(v, 0xDEADBEEFu);
}

TEST(Quant, RegroupedRowsAsBf16PairsAreTheReferenceRounded) {
  if (!bf16_dot_available()) GTEST_SKIP() << "no AVX-512-BF16 here";
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,
                      QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS}) {
    // K = 96 for the blocks of 32 (IQ4_NL included: not a multiple of 256), three super-blocks otherwise
    const int64_t N = 48, K = quant_type_info(uint32_t(t))->block_elems == 256 ? 768 : 96;
    std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 31);
    testing::set_extreme_scales(t, raw);
    expect_reference_pairs(t, raw, N, K);
  }
}

// The IQ4 tables at their edges (testing::iq4_edge_rows: f16 extremes as block scales, every IQ4_XS sub-block scale
// ls - 32 from -32 through 0 to 31, every code in both nibbles), so that a wrong table entry, a swapped sub-block or
// nibble half, or a misplaced lane changes a pair.
TEST(Quant, RegroupedIq4RowsAsBf16PairsAtTheirEdgesAreTheReferenceRounded) {
  if (!bf16_dot_available()) GTEST_SKIP() << "no AVX-512-BF16 here";
  for (QuantType t : {QuantType::IQ4_NL, QuantType::IQ4_XS}) {
    const int64_t N = 48, K = t == QuantType::IQ4_XS ? 512 : 160;  // IQ4_NL: 5 blocks, K not a multiple of 256
    const std::vector<uint8_t> raw = testing::iq4_edge_rows(t, N, K);
    if (t == QuantType::IQ4_XS) {  // the helper's encoding states iq4_xs_scale's: it lands where the reference reads
      for (int64_t j = 0; j < 8; ++j)  // row 1, block 1
        ASSERT_EQ(iq4_xs_scale(raw.data() + 136 * (K / 256 + 1), int(j)) + 32, (5 + 8 + j * 7) % 64);
    }
    expect_reference_pairs(t, raw, N, K);
  }
}

}  // namespace
}  // namespace attnzoo
