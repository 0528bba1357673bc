#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

const QuantType kTypes[] = {QuantType::F32,  QuantType::F16,  QuantType::BF16, QuantType::Q4_0, QuantType::Q4_1,
                            QuantType::Q5_0, QuantType::Q5_1, QuantType::Q8_0, QuantType::Q2_K, QuantType::Q3_K,
                            QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K, QuantType::MXFP4, QuantType::IQ4_NL,
                            QuantType::IQ4_XS};

TEST(Quant, FastDequantizationIsBitIdenticalToTheReferenceOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (QuantType t : kTypes) {
      const int64_t n = 256 * 3;
      const std::vector<uint8_t> raw = testing::random_quant_rows(t, 1, n, 11 + uint64_t(t));
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -7.f);
      dequantize_row_reference(t, raw.data(), want.data(), n);
      dequantize_row(t, raw.data(), got.data(), n);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), size_t(n) * 4)) << quant_type_name(t);
      double mag = 0;
      for (float v : want) mag = std::max(mag, double(std::fabs(v)));
      EXPECT_GT(mag, 0.0) << quant_type_name(t) << ": all-zero data would not test anything";
    }
  });
}

// A hand-made Q4_0 block: the definition, independent of either implementation.
TEST(Quant, Q4_0BlockByHand) {
  uint8_t b[18];
  const uint16_t h = f32_to_f16(0.5f);
  std::memcpy(b, &h, 2);
  for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(QuantType::Q4_0, b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * float(j - 8));
    EXPECT_EQ(y[16 + j], 0.5f * float(7 - j));
  }
}

// Hand-made IQ4 blocks: the grid, the nibble order and IQ4_XS's split 6-bit scales, independent of either
// implementation.
TEST(Quant, Iq4BlocksByHand) {
  const int grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  const uint16_t half = f32_to_f16(0.5f);
  uint8_t nl[18];
  std::memcpy(nl, &half, 2);
  for (int j = 0; j < 16; ++j) nl[2 + j] = uint8_t(j | ((15 - j) << 4));
  float y[256];
  dequantize_row(QuantType::IQ4_NL, nl, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * float(grid[j]));
    EXPECT_EQ(y[16 + j], 0.5f * float(grid[15 - j]));
  }
  // Sub-block scales ls = 0, 9, 32, 63, 17, 48, 40, 1: low nibbles in scales_l, two high bits each in scales_h.
  const int ls[8] = {0, 9, 32, 63, 17, 48, 40, 1};
  uint8_t xs[136] = {};
  std::memcpy(xs, &half, 2);
  uint16_t scales_h = 0;
  for (int j = 0; j < 8; ++j) {
    xs[4 + j / 2] = uint8_t(xs[4 + j / 2] | ((ls[j] & 0xF) << (4 * (j % 2))));
    scales_h = uint16_t(scales_h | ((ls[j] >> 4) << (2 * j)));
  }
  std::memcpy(xs + 2, &scales_h, 2);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) xs[8 + 16 * j + l] = uint8_t(((l + j) & 0xF) | (((l + 2 * j + 1) & 0xF) << 4));
  dequantize_row(QuantType::IQ4_XS, xs, y, 256);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) {
      const float dl = 0.5f * float(ls[j] - 32);
      EXPECT_EQ(y[32 * j + l], dl * float(grid[(l + j) & 0xF])) << "sub-block " << j << " element " << l;
      EXPECT_EQ(y[32 * j + 16 + l], dl * float(grid[(l + 2 * j + 1) & 0xF])) << "sub-block " << j << " element " << l;
    }
}

// The integer path quantizes each block of 32 activations to x = d q with |x - d q| <= d / 2, d = amax / 127:
// |error| <= sum_k |w_k| d_k / 2 (plus f32 rounding). The f32 path differs from the reference only by rounding.
// `grouped`: the products run on the rows regrouped as row_groups.h lays them out (N a multiple of 16).
void check_gemv(QuantType t, int64_t T, int64_t N, int64_t K, bool bias, bool int8, bool grouped = false) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 100 + uint64_t(t) * 7 + uint64_t(N));
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
  std::vector<uint8_t> regrouped(grouped ? raw.size() : 0);
  const QuantMatrix used = grouped ? to_row_groups(w, regrouped.data()) : w;
  testing::HostTensor x(DType::f32, {T, K}, 3 + uint64_t(T)), b(DType::f32, {N}, 4);
  const float* bp = bias ? b.view.ptr<float>() : nullptr;
  std::vector<float> got(size_t(T * N), -1.f), want(got.size());
  if (int8)
    quant_gemv(used, bp, x.view.ptr<float>(), T, got.data(), N);
  else
    quant_gemv_f32(used, bp, x.view.ptr<float>(), T, got.data(), N);
  quant_matmul_reference(w, bp, x.view.ptr<float>(), T, want.data(), N);
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    dequantize_row_reference(t, w.row(n), row.data(), K);
    for (int64_t tt = 0; tt < T; ++tt) {
      double bound = 0, abs_sum = 0;
      for (int64_t k0 = 0; k0 < K; k0 += 32) {
        float amax = 0;
        for (int64_t k = k0; k < k0 + 32; ++k) amax = std::max(amax, std::fabs(x.at(tt * K + k)));
        for (int64_t k = k0; k < k0 + 32; ++k) {
          bound += std::fabs(row[size_t(k)]) * amax / 127.0 / 2;
          abs_sum += std::fabs(row[size_t(k)] * x.at(tt * K + k));
        }
      }
      const double tol = (int8 ? bound : 0.0) + 1e-5 * abs_sum + 1e-6;
      EXPECT_NEAR(got[size_t(tt * N + n)], want[size_t(tt * N + n)], tol)
          << quant_type_name(t) << (int8 ? " int8" : " f32") << (grouped ? " regrouped" : "") << " T=" << T << " N=" << N << " K=" << K << " row "
          << n << " token " << tt;
    }
  }
}

TEST(Quant, GemvMatchesDoubleReferenceOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (QuantType t : kTypes)
      for (int64_t T : {1, 3, 8, 11})
        // K = 96: an odd number of blocks of 32 (the VNNI rows pair them); 2208 / 2304: more blocks than the
        // AVX-512 f32 rows convert scales for at once (64), with a tail
        for (int64_t K : {int64_t(512), quant_type_info(uint32_t(t))->block_elems == 32 ? int64_t(96) : int64_t(256),
                          quant_type_info(uint32_t(t))->block_elems == 32 ? int64_t(32 * 69) : int64_t(256 * 9)}) {
          check_gemv(t, T, 37, K, T % 2 == 1, false);
          if (quant_gemv_has_int8(t)) check_gemv(t, T, 37, K, T % 2 == 0, true);
        }
  });
}

// Rows regrouped for the VNNI decode (row_groups.h): the VNNI rows read them in place, every other path (other
// targets, f32 activations, many tokens) through rows copied back, all within the same bounds.
constexpr QuantType kGroupFormats[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K,
                                       QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS};

TEST(Quant, RegroupedRowsGiveTheSameProductsOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (QuantType t : kGroupFormats)
      for (int64_t T : {1, 3, 5, 8, 11, 77})
        for (int64_t K : quant_type_info(uint32_t(t))->block_elems == 256 ? std::vector<int64_t>{256, 512}
                                                                           : std::vector<int64_t>{96, 32 * 69}) {
          if (K > 256 && T > 11) continue;  // the many-token tiling is covered at the shorter K; the reference is slow
          check_gemv(t, T, 48, K, T % 2 == 1, /*int8=*/true, /*grouped=*/true);
          check_gemv(t, T, 48, K, T % 2 == 0, /*int8=*/false, /*grouped=*/true);
        }
  });
}

TEST(Quant, RegroupedRowsComeBackByteForByte) {
  for (QuantType t : kGroupFormats) {
    const int64_t N = 32, K = quant_type_info(uint32_t(t))->block_elems == 256 ? 512 : 96;
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 11);
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    std::vector<uint8_t> regrouped(raw.size());
    const QuantMatrix g = to_row_groups(w, regrouped.data());
    EXPECT_NE(0, std::memcmp(raw.data(), regrouped.data(), raw.size())) << quant_type_name(t);
    AlignedBuffer<uint8_t> scratch;
    for (int64_t r = 0; r < N; ++r)
      EXPECT_EQ(0, std::memcmp(row_of_group(g, r, scratch), w.row(r), size_t(w.row_bytes)))
          << quant_type_name(t) << " row " << r;
  }
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_0, 24, 32, 12);
  std::vector<uint8_t> out(raw.size());
  EXPECT_THROW(to_row_groups(make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, 24, 32, "w"), out.data()),
               ArgumentError);
}

// The prefill panels' dequantization reads regrouped rows in place (dequant.cc, GroupedRows): every value is the
// reference's of the GGUF row, on every target, for ranges of whole groups at a panel start inside the matrix,
// ranges that start or end inside a group, and one row.
TEST(Quant, RegroupedRowsDequantizeToTheGgufRowsOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (QuantType t : kGroupFormats)
      for (int64_t K : quant_type_info(uint32_t(t))->block_elems == 256 ? std::vector<int64_t>{256, 768}
                                                                         : std::vector<int64_t>{32, 96}) {
        const int64_t N = 48;
        const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 21);
        const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
        std::vector<uint8_t> regrouped(raw.size());
        const QuantMatrix g = to_row_groups(w, regrouped.data());
        std::vector<float> want(size_t(N * K)), got(want.size() + 1);  // one past: nothing written beyond nr rows
        for (int64_t r = 0; r < N; ++r) dequantize_row_reference(t, w.row(r), want.data() + r * K, K);
        for (const auto& [r0, nr] : {std::pair<int64_t, int64_t>{0, N}, {16, 32}, {5, N - 5}, {0, 20}, {21, 3},
                                     {47, 1}}) {
          std::fill(got.begin(), got.end(), -1.f);
          dequantize_rows(g, r0, nr, got.data());
          EXPECT_EQ(0, std::memcmp(want.data() + r0 * K, got.data(), size_t(nr * K) * sizeof(float)))
              << quant_type_name(t) << " K " << K << " rows " << r0 << " + " << nr;
          EXPECT_EQ(got[size_t(nr * K)], -1.f) << "wrote past row " << r0 + nr;
        }
      }
  });
}

// Each token's integer-path result is the one it gets alone, for any number of tokens (the many-token tiling
// included) and on every target: what batch-invariant numerics rest on (core/batch_invariance.h).
TEST(Quant, Int8GemvGivesEachTokenItsLoneResult) {
  testing::for_each_target([](Target) {
    for (QuantType t : kTypes) {
      if (!quant_gemv_has_int8(t)) continue;
      // 64 rows where they can be regrouped (row_groups.h), so that the regrouped rows are checked too
      const int64_t N = row_groups_format(t) ? 64 : 70, K = quant_type_info(uint32_t(t))->block_elems == 32 ? 96 : 512;
      const int64_t T = 77;
      const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 7);
      std::vector<uint8_t> regrouped(raw.size());
      const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
      for (const QuantMatrix& w : {gguf, row_groups_format(t) ? to_row_groups(gguf, regrouped.data()) : gguf}) {
        testing::HostTensor x(DType::f32, {T, K}, 8);
        std::vector<float> all(size_t(T * N)), one(static_cast<size_t>(N));
        quant_gemv(w, nullptr, x.view.ptr<float>(), T, all.data(), N);
        for (int64_t tok : {int64_t(0), int64_t(5), int64_t(8), int64_t(63), T - 1}) {
          quant_gemv(w, nullptr, x.view.ptr<float>() + tok * K, 1, one.data(), N);
          EXPECT_EQ(0, std::memcmp(one.data(), all.data() + tok * N, size_t(N) * sizeof(float)))
              << quant_type_name(t) << (w.row_group ? " regrouped" : "") << " token " << tok;
        }
      }
    }
  });
}

// One quantization shared by matrices whose rows read different arrays of it (GGUF rows: the per-lane scales and
// lane sums; regrouped rows: neither; quantize_rows writes those only where a matrix reads them) gives each matrix
// the bits it gets alone, on every target, at decode and prompt token counts (the prompt tiling from 9).
TEST(Quant, SharedQuantizationGivesEachMatrixItsLoneResult) {
  testing::for_each_target([](Target) {
    for (QuantType t : kTypes) {
      if (!quant_gemv_has_int8(t) || !row_groups_format(t)) continue;
      const int64_t N = 32, K = quant_type_info(uint32_t(t))->block_elems == 32 ? 96 : 256;
      const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 11);
      std::vector<uint8_t> regrouped(raw.size());
      const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
      const QuantMatrix grouped = to_row_groups(gguf, regrouped.data());
      for (int64_t T : {1, 3, 8, 9, 64, 513}) {
        testing::HostTensor x(DType::f32, {T, K}, 12);
        const float* xp = x.view.ptr<float>();
        std::vector<float> alone_g(size_t(T * N)), alone_r(size_t(T * N)), a(size_t(T * N)), b(size_t(T * N));
        quant_gemv(gguf, nullptr, xp, T, alone_g.data(), N);
        quant_gemv(grouped, nullptr, xp, T, alone_r.data(), N);
        for (const auto& [first, second] : {std::pair{&gguf, &grouped}, std::pair{&grouped, &grouped}}) {
          const QuantGemvOutput outs[2] = {{first, nullptr, a.data(), N}, {second, nullptr, b.data(), N}};
          quant_gemv_shared({outs, 2}, xp, T);
          const std::string at = std::string(quant_type_name(t)) + " T=" + std::to_string(T) +
                                 (first == &gguf ? " GGUF + regrouped" : " regrouped twice");
          EXPECT_EQ(0, std::memcmp(a.data(), (first == &gguf ? alone_g : alone_r).data(), a.size() * 4)) << at;
          EXPECT_EQ(0, std::memcmp(b.data(), alone_r.data(), b.size() * 4)) << at;
        }
      }
    }
  });
}

// The bound above is loose; on average the integer path's error is far below it, and an error as large as a
// wrong scale or a swapped nibble would not be.
TEST(Quant, Int8GemvErrorIsSmallRelativeToTheOutput) {
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1, QuantType::Q4_K,
                      QuantType::Q5_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::IQ4_NL, QuantType::IQ4_XS}) {
    const int64_t N = 64, K = 1024;
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 5);
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    testing::HostTensor x(DType::f32, {1, K}, 6);
    std::vector<float> got(static_cast<size_t>(N)), want(static_cast<size_t>(N));
    quant_gemv(w, nullptr, x.view.ptr<float>(), 1, got.data(), N);
    quant_matmul_reference(w, nullptr, x.view.ptr<float>(), 1, want.data(), N);
    double num = 0, den = 0;
    for (int64_t n = 0; n < N; ++n) {
      num += double(got[size_t(n)] - want[size_t(n)]) * (got[size_t(n)] - want[size_t(n)]);
      den += double(want[size_t(n)]) * want[size_t(n)];
    }
    EXPECT_LT(std::sqrt(num / den), 0.02) << quant_type_name(t);
  }
}

TEST(Quant, NonFiniteActivationsGiveNaN) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_K, 4, 256, 3);
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_K, 4, 256, "w");
  testing::for_each_target([&](Target) {
    for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> x(512, 0.5f), y(8, 0.f);
      x[300] = bad;  // token 1
      quant_gemv(w, nullptr, x.data(), 2, y.data(), 4);
      for (int n = 0; n < 4; ++n) {
        EXPECT_TRUE(std::isfinite(y[size_t(n)]));
        EXPECT_TRUE(std::isnan(y[size_t(4 + n)]));
      }
    }
  });
}

TEST(Quant, MakeQuantMatrixNamesTheProblem) {
  std::vector<uint8_t> raw(18 * 4);
  EXPECT_EQ(make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, 2, 64, "w").row_bytes, 36);
  auto message = [&](QuantType t, int64_t rows, int64_t cols) {
    try {
      make_quant_matrix(raw.data(), raw.size(), t, rows, cols, "blk.0.attn_q.weight");
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(QuantType::IQ2_XXS, 1, 256).find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(message(QuantType::IQ2_XXS, 1, 256).find("IQ2_XXS"), std::string::npos);
  EXPECT_NE(message(QuantType::Q4_0, 2, 40).find("whole number"), std::string::npos);
  EXPECT_NE(message(QuantType::Q4_0, 3, 64).find("too few"), std::string::npos);
  EXPECT_NE(message(QuantType::Q4_0, 0, 64).find("positive"), std::string::npos);
  EXPECT_NE(message(QuantType::IQ4_XS, 1, 128).find("whole number of IQ4_XS blocks of 256"), std::string::npos);
  EXPECT_NE(message(QuantType::IQ4_XS, 1, 256).find("72 bytes are too few for [1, 256] IQ4_XS"), std::string::npos);
  EXPECT_NE(message(QuantType::IQ4_NL, 5, 32).find("too few"), std::string::npos);
}

}  // namespace
}  // namespace attnzoo

namespace attnzoo {
namespace {

// Run by hand: test_kernels_quant --gtest_also_run_disabled_tests --gtest_filter='*Bench*'.
TEST(Quant, DISABLED_BenchGemv) {
  const int64_t N = 1024, K = 1024;
  testing::HostTensor x(DType::f32, {8, K}, 1);
  std::vector<float> y(size_t(8 * N));
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,
                      QuantType::Q6_K, QuantType::Q5_0, QuantType::Q2_K, QuantType::BF16}) {
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 2);
    const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    std::vector<uint8_t> regrouped(raw.size());
    const QuantMatrix grouped = row_groups_format(t) ? to_row_groups(gguf, regrouped.data()) : gguf;
    for (int path = 0; path < 3; ++path)
      for (int64_t T : {1, 4}) {
        if (path == 2 && !grouped.row_group) continue;
        const QuantMatrix& w = path == 2 ? grouped : gguf;
        auto run = [&] { (path ? quant_gemv : quant_gemv_f32)(w, nullptr, x.view.ptr<float>(), T, y.data(), N); };
        run();
        double best = 1e9;
        for (int r = 0; r < 200; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          run();
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("%-5s %s T=%lld: %7.1f us, %5.1f GB/s\n", quant_type_name(t),
                    path == 2 ? "int8 regrouped" : path ? "int8" : "f32 ",
                    (long long)T, best * 1e6, double(raw.size()) / best * 1e-9);
      }
  }
}

}  // namespace
}  // namespace attnzoo
