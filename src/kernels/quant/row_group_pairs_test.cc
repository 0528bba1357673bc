// Regrouped rows decoded straight into bf16 pairs (row_group_pairs.h) are the reference dequantization rounded to
// nearest even, bit for bit, for any range of whole runs of four rows; anything else is refused untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/bf16_dot.h"
#include "core/dtype.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/row_group_pairs.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {

TEST(Quant, RegroupedRowsAsBf16PairsAreTheReferenceRounded) {
  if (!bf16_dot_available()) GTEST_SKIP() << "no AVX-512-BF16 here";
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,
                      QuantType::Q6_K}) {
    const int64_t N = 48, K = quant_type_info(uint32_t(t))->block_elems == 256 ? 768 : 96, K2 = K / 2;
    std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 31);
    testing::set_extreme_scales(t, raw);
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    std::vector<uint8_t> regrouped(raw.size());
    const QuantMatrix g = to_row_groups(w, regrouped.data());
    std::vector<float> f(static_cast<size_t>(K));
    std::vector<uint32_t> want(size_t(N * K2));
    for (int64_t r = 0; r < N; ++r) {
      dequantize_row_reference(t, w.row(r), f.data(), K);
      for (int64_t k = 0; k < K2; ++k)
        want[size_t(r * K2 + k)] = uint32_t(f32_to_bf16(f[size_t(2 * k)])) | uint32_t(f32_to_bf16(f[size_t(2 * k + 1)])) << 16;
    }
    const size_t stride = size_t(K2) + 5;  // rows apart by more than K / 2 pairs: the gap stays untouched
    for (const auto& [r0, nr] : {std::pair<int64_t, int64_t>{0, N}, {16, 32}, {4, 8}, {20, 28}, {44, 4}}) {
      std::vector<uint32_t> got(size_t(nr) * stride, 0xDEADBEEFu);
      ASSERT_TRUE(row_group_pairs(g, r0, nr, got.data(), stride)) << quant_type_name(t) << " rows " << r0 << " + " << nr;
      for (int64_t r = 0; r < nr; ++r) {
        EXPECT_EQ(0, std::memcmp(want.data() + (r0 + r) * K2, got.data() + size_t(r) * stride, size_t(K2) * 4))
            << quant_type_name(t) << " row " << r0 + r << " of rows " << r0 << " + " << nr;
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
}

// Regrouped IQ4_NL / IQ4_XS have no straight bf16 decode yet: refused untouched, so that the GEMM takes
// dequantize_rows (which reads their units in place: quant_test.cc).
TEST(Quant, RegroupedIq4RowsAreRefusedAsBf16Pairs) {
  for (QuantType t : {QuantType::IQ4_NL, QuantType::IQ4_XS}) {
    const int64_t N = 16, K = 256;
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 3);
    std::vector<uint8_t> regrouped(raw.size());
    const QuantMatrix g = to_row_groups(make_quant_matrix(raw.data(), raw.size(), t, N, K, "w"), regrouped.data());
    std::vector<uint32_t> got(size_t(N * K / 2), 0xDEADBEEFu);
    EXPECT_FALSE(row_group_pairs(g, 0, N, got.data(), size_t(K / 2))) << quant_type_name(t);
    for (uint32_t v : got) ASSERT_EQ(v, 0xDEADBEEFu);
  }
}

}  // namespace
}  // namespace attnzoo
