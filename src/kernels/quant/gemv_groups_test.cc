// The regrouped rows (row_groups.h), VNNI and AVX2 alike, hold llama.cpp's numerics bit for bit: each block's (or
// sub-block's) integer dot exact, then one f32 FMA per block with d_w d_x, in block order; here that sequence is
// written out in scalar code and compared with memcmp, so that a change of unpacking (the high nibbles' chain kept
// in place and shifted once, say) must leave every output bit as it was, and a change of operation order shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/avx_vnni.h"
#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

struct Activations {
  std::vector<int16_t> q;
  std::vector<float> d, dsum16, dsum32;
  std::vector<int32_t> xsum16;
};

Activations quantized(const float* x, size_t T, size_t K) {
  Activations a{std::vector<int16_t>(T * K), std::vector<float>(T * K / 32), std::vector<float>(T * K / 16),
                std::vector<float>(T * K / 32), std::vector<int32_t>(T * K / 16)};
  quantize_activations(x, T, K, QuantActivationsOut{.q = a.q.data(), .d = a.d.data(), .dsum16 = a.dsum16.data(),
                                                    .dsum32 = a.dsum32.data(), .xsum16 = a.xsum16.data(),
                                                    .xs8 = nullptr, .dx8 = nullptr, .xsum4_neg8 = nullptr,
                                                    .xsum4_neg128 = nullptr, .dxsum4 = nullptr, .ld8 = 0});
  return a;
}

// Row `row` (GGUF blocks) against token t, in the regrouped kernels' order.
float expected(QuantType type, const uint8_t* row, size_t K, const Activations& a, size_t t) {
  const int16_t* x = a.q.data() + t * K;
  const float* d = a.d.data() + t * (K / 32);
  float acc = 0.f;
  if (type == QuantType::Q4_K || type == QuantType::Q5_K) {
    const bool five = type == QuantType::Q5_K;
    for (size_t blk = 0; blk < K / 256; ++blk) {
      const uint8_t* b = row + (five ? 176 : 144) * blk;
      const float dw = load_half(b), dmin = load_half(b + 2);
      for (int c = 0; c < 4; ++c) {
        int32_t isum[2] = {};
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = b[(five ? 48 : 16) + 32 * c + l], h = five ? b[16 + l] : 0;
          isum[0] += ((q & 15) | (((h >> (2 * c)) & 1) << 4)) * x[256 * blk + 64 * c + l];
          isum[1] += ((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4)) * x[256 * blk + 64 * c + 32 + l];
        }
        const size_t b32 = 8 * blk + 2 * size_t(c);
        const KScaleMin lo = k_scale_min(b + 4, 2 * c), hi = k_scale_min(b + 4, 2 * c + 1);
        acc = std::fma(float(isum[0]), dw * float(lo.scale) * d[b32], acc);
        acc = std::fma(float(isum[1]), dw * float(hi.scale) * d[b32 + 1], acc);
        acc = std::fma(-(dmin * float(lo.min)), a.dsum32[t * (K / 32) + b32], acc);
        acc = std::fma(-(dmin * float(hi.min)), a.dsum32[t * (K / 32) + b32 + 1], acc);
      }
    }
    return acc;
  }
  if (type == QuantType::Q6_K) {
    for (size_t blk = 0; blk < K / 256; ++blk) {
      const uint8_t* b = row + 210 * blk;
      const float dw = load_half(b + 208);
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 2; ++p)
          for (int j = 0; j < 4; ++j) {
            int32_t isum = 0;
            for (int l = 16 * p; l < 16 * p + 16; ++l) {  // element 128h + 32j + l, sub-block 8h + 2j + p
              const uint8_t ql = b[64 * h + 32 * (j % 2) + l], qh = b[128 + 32 * h + l];
              const int q = ((j < 2 ? ql & 15 : ql >> 4) | (((qh >> (2 * j)) & 3) << 4)) - 32;
              isum += q * x[256 * blk + 128 * size_t(h) + 32 * size_t(j) + size_t(l)];
            }
            const float sc = dw * float(int8_t(b[192 + 8 * h + 2 * j + p]));
            acc = std::fma(float(isum), sc * d[8 * blk + 4 * size_t(h) + size_t(j)], acc);
          }
    }
    return acc;
  }
  if (type == QuantType::IQ4_XS) {  // sub-blocks of 32 in block order, scale d (ls - 32)
    for (size_t blk = 0; blk < K / 256; ++blk) {
      const uint8_t* b = row + 136 * blk;
      for (size_t j = 0; j < 8; ++j) {
        int32_t isum = 0;
        for (size_t i = 0; i < 32; ++i) {
          const uint8_t q = b[8 + 16 * j + i % 16];
          isum += kIq4Values[i < 16 ? q & 15 : q >> 4] * x[256 * blk + 32 * j + i];
        }
        const int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((load_u16(b + 2) >> (2 * j)) & 3) << 4);
        acc = std::fma(float(isum), load_half(b) * float(ls - 32) * d[8 * blk + j], acc);
      }
    }
    return acc;
  }
  const size_t bytes = type == QuantType::Q8_0 ? 34 : type == QuantType::Q4_1 ? 20 : 18;
  const size_t head = type == QuantType::Q4_1 ? 4 : 2;
  for (size_t blk = 0; blk < K / 32; ++blk) {
    const uint8_t* b = row + bytes * blk;
    int32_t isum = 0;
    for (size_t i = 0; i < 32; ++i) {
      const int w = type == QuantType::Q8_0   ? int(int8_t(b[head + i]))
                    : type == QuantType::Q4_0 ? (i < 16 ? b[head + i] & 15 : b[head + i - 16] >> 4) - 8
                    : type == QuantType::IQ4_NL ? int(kIq4Values[i < 16 ? b[head + i] & 15 : b[head + i - 16] >> 4])
                                                : (i < 16 ? b[head + i] & 15 : b[head + i - 16] >> 4);
      isum += w * x[32 * blk + i];
    }
    acc = std::fma(float(isum), load_half(b) * d[blk], acc);
    if (type == QuantType::Q4_1) acc = std::fma(load_half(b + 2), a.dsum32[t * (K / 32) + blk], acc);
  }
  return acc;
}

constexpr QuantType kFormats[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K,
                                  QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS};

// fn() on every kernel that reads the regrouped bytes in place: each target's (the VNNI rows, the AVX2 rows) and,
// where the AVX2 rows run on a CPU with AVX-VNNI (ATTNZOO_AVX_VNNI not 0), those rows on vpmaddubsw and on
// vpdpbusd, each observed to have run as named. The scalar target's portable rows read the bytes copied back and
// keep their own order. Returns how many kernels ran.
int for_each_regrouped_kernel(const std::function<void()>& fn) {
  int checked = 0;
  testing::for_each_target([&](Target) {
    if (!quant_gemv_vnni_enabled() && !quant_gemv_avx2_enabled()) return;
    const bool avx2_rows = !quant_gemv_vnni_enabled();
    for (bool avx_vnni : {false, true}) {
      quant_gemv_groups_allow_avx_vnni(avx_vnni);
      if (avx_vnni && !(avx2_rows && quant_gemv_groups_avx_vnni_enabled())) continue;
      SCOPED_TRACE(avx_vnni ? "AVX-VNNI" : "");
      const uint64_t before = quant_gemv_groups_avx_vnni_tasks();
      fn();
      ++checked;
      if (avx_vnni)
        EXPECT_GT(quant_gemv_groups_avx_vnni_tasks(), before) << "the AVX2 rows did not take vpdpbusd";
      else
        EXPECT_EQ(quant_gemv_groups_avx_vnni_tasks(), before) << "vpdpbusd ran with AVX-VNNI turned off";
    }
    quant_gemv_groups_allow_avx_vnni(true);
  });
  return checked;
}

TEST(QuantGroups, RegroupedRowsAreBlockOrderFmasOfExactIntegerDots) {
  const int checked = for_each_regrouped_kernel([&] {
    for (QuantType type : kFormats) {
      const int64_t N = 32, K = quant_type_info(uint32_t(type))->block_elems == 256 ? 512 : 96;
      const std::vector<uint8_t> raw = testing::random_quant_rows(type, N, K, 31 + uint64_t(type));
      const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), type, N, K, "w");
      std::vector<uint8_t> bytes(raw.size());
      const QuantMatrix grouped = to_row_groups(gguf, bytes.data());
      for (int64_t T = 1; T <= 5; ++T) {  // 1-4 tokens at once, and 4 + 1
        testing::HostTensor x(DType::f32, {T, K}, 40 + uint64_t(T));
        std::vector<float> got(size_t(T * N)), want(got.size());
        quant_gemv(grouped, nullptr, x.view.ptr<float>(), T, got.data(), N);
        const Activations a = quantized(x.view.ptr<float>(), size_t(T), size_t(K));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n)
            want[size_t(t * N + n)] = expected(type, gguf.row(n), size_t(K), a, size_t(t)) + 0.f;
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << quant_type_name(type) << " T=" << T << ": first " << got[0] << " vs " << want[0];
        // the same rows read as GGUF rows (the VNNI rows: the same bits; the AVX2 target's IQ4 rows are the
        // portable ones, whose f32 order differs): within f32 rounding of the outputs' scale
        std::vector<float> rows(got.size());
        quant_gemv(gguf, nullptr, x.view.ptr<float>(), T, rows.data(), N);
        float scale = 0.f;
        for (float v : want) scale = std::max(scale, std::abs(v));
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_NEAR(got[i], rows[i], 1e-5f * scale) << quant_type_name(type) << " T=" << T << " output " << i;
      }
    }
  });
  if (checked == 0) GTEST_SKIP() << "no target here runs the regrouped rows in place";
}

// Weights whose integer dots come near the i16 bound of vpmaddubsw (nibbles 15, Q8_0's -128, Q6_K's 63, IQ4's -127, against
// activations of 127 in magnitude) give the exact sums there too.
TEST(QuantGroups, RegroupedRowsAtTheExtremesAreExact) {
  const int checked = for_each_regrouped_kernel([&] {
    for (QuantType type : kFormats) {
      const int64_t N = 16, K = 256, T = 2;
      std::vector<uint8_t> raw = testing::random_quant_rows(type, N, K, 7);
      const QuantTypeInfo info = *quant_type_info(uint32_t(type));
      // every value byte at its largest magnitude (scales kept): 0xFF nibbles, Q8_0's -128 (0x80)
      const int64_t bytes = info.block_bytes;
      for (int64_t blk = 0; blk < N * K / info.block_elems; ++blk) {
        uint8_t* b = raw.data() + blk * bytes;
        if (type == QuantType::Q8_0) std::memset(b + 2, 0x80, 32);
        if (type == QuantType::Q4_0) std::memset(b + 2, 0xFF, 16);
        if (type == QuantType::Q4_1) std::memset(b + 4, 0xFF, 16);
        if (type == QuantType::Q4_K) std::memset(b + 16, 0xFF, 128);
        if (type == QuantType::Q5_K) std::memset(b + 16, 0xFF, 160);  // qh and qs: every value 31
        if (type == QuantType::Q6_K) std::memset(b, 0xFF, 192);
        if (type == QuantType::IQ4_NL) std::memset(b + 2, 0x00, 16);  // the grid's -127
        if (type == QuantType::IQ4_XS) std::memset(b + 8, 0x00, 128);
      }
      const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), type, N, K, "w");
      std::vector<uint8_t> regrouped(raw.size());
      const QuantMatrix grouped = to_row_groups(gguf, regrouped.data());
      std::vector<float> x(size_t(T * K));
      for (size_t i = 0; i < x.size(); ++i) x[i] = i < size_t(K) ? 1.f : -1.f;  // q = 127 and -127
      std::vector<float> got(size_t(T * N)), want(got.size());
      quant_gemv(grouped, nullptr, x.data(), T, got.data(), N);
      const Activations a = quantized(x.data(), size_t(T), size_t(K));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n)
          want[size_t(t * N + n)] = expected(type, gguf.row(n), size_t(K), a, size_t(t)) + 0.f;
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << quant_type_name(type) << ": first " << got[0] << " vs " << want[0];
    }
  });
  if (checked == 0) GTEST_SKIP() << "no target here runs the regrouped rows in place";
}

// The IQ4 rows at their edges (testing::iq4_edge_rows: f16 extremes as block scales, every IQ4_XS sub-block scale,
// every code in both nibbles), three groups of 16 rows, 1-5 tokens: a wrong grid entry, a swapped nibble half or
// sub-block, a misread scale field or a misplaced row changes an output bit.
TEST(QuantGroups, RegroupedIq4RowsAtTheirEdgesAreExact) {
  const int checked = for_each_regrouped_kernel([&] {
    for (QuantType type : {QuantType::IQ4_NL, QuantType::IQ4_XS}) {
      const int64_t N = 48, K = type == QuantType::IQ4_XS ? 512 : 160;  // IQ4_NL: 5 blocks, K not of 256s
      const std::vector<uint8_t> raw = testing::iq4_edge_rows(type, N, K);
      const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), type, N, K, "w");
      std::vector<uint8_t> bytes(raw.size());
      const QuantMatrix grouped = to_row_groups(gguf, bytes.data());
      for (int64_t T = 1; T <= 5; ++T) {
        testing::HostTensor x(DType::f32, {T, K}, 60 + uint64_t(T));
        std::vector<float> got(size_t(T * N)), want(got.size());
        quant_gemv(grouped, nullptr, x.view.ptr<float>(), T, got.data(), N);
        const Activations a = quantized(x.view.ptr<float>(), size_t(T), size_t(K));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n)
            want[size_t(t * N + n)] = expected(type, gguf.row(n), size_t(K), a, size_t(t)) + 0.f;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(0, std::memcmp(&got[i], &want[i], sizeof(float)))
              << quant_type_name(type) << " T=" << T << " token " << i / size_t(N) << " row " << i % size_t(N)
              << ": " << got[i] << " vs " << want[i];
      }
    }
  });
  if (checked == 0) GTEST_SKIP() << "no target here runs the regrouped rows in place";
}

// Every regrouped format (Q5_K, IQ4_NL and IQ4_XS included) is regrouped at load where the VNNI or the AVX2 rows
// run, so that a model on either reads it in place, and nowhere else.
TEST(QuantGroups, EveryFormatRegroupsWhereTheVnniOrAvx2RowsRun) {
  testing::for_each_target([](Target target) {
    for (QuantType type : kFormats) {
      const int64_t N = 32, K = quant_type_info(uint32_t(type))->block_elems == 256 ? 256 : 64;
      const std::vector<uint8_t> raw = testing::random_quant_rows(type, N, K, 9);
      const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), type, N, K, "w");
      EXPECT_EQ(row_groups_pay(gguf), quant_gemv_vnni_enabled() || quant_gemv_avx2_enabled())
          << quant_type_name(type) << " on " << target_name(target);
    }
  });
}

// Where the CPU has AVX-VNNI and the AVX2 rows run (AVX2 forced on an AVX-512 VNNI CPU, or a client CPU without
// AVX-512), a regrouped matrix's rows take vpdpbusd, and ATTNZOO_AVX_VNNI=0's state keeps them off it.
TEST(QuantGroups, AvxVnniRowsRunWhereTheCpuHasIt) {
  const auto targets = supported_targets();
  if (std::find(targets.begin(), targets.end(), Target::avx2) == targets.end()) GTEST_SKIP() << "no AVX2 here";
  if (!avx_vnni_support().use) GTEST_SKIP() << avx_vnni_support().reason;
  const Target saved = active_target();
  set_target(Target::avx2);
  const int64_t N = 32, K = 64;
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_0, N, K, 5);
  const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, N, K, "w");
  std::vector<uint8_t> bytes(raw.size());
  const QuantMatrix grouped = to_row_groups(gguf, bytes.data());
  std::vector<float> x(size_t(K), 0.5f), y(static_cast<size_t>(N));
  uint64_t before = quant_gemv_groups_avx_vnni_tasks();
  quant_gemv(grouped, nullptr, x.data(), 1, y.data(), N);
  EXPECT_GT(quant_gemv_groups_avx_vnni_tasks(), before);
  quant_gemv_groups_allow_avx_vnni(false);
  before = quant_gemv_groups_avx_vnni_tasks();
  quant_gemv(grouped, nullptr, x.data(), 1, y.data(), N);
  EXPECT_EQ(quant_gemv_groups_avx_vnni_tasks(), before);
  quant_gemv_groups_allow_avx_vnni(true);
  set_target(saved);
}

// quantize_activations against its plain definition, bit for bit, on every target: d = amax / 127 per 32 values,
// q = round(x / d) ties to even (x times the f32 reciprocal), the sums of each 16 and 32 q and d times them, the
// int8 copy and its per-lane d padded with zeros to 64; a block of zeros (d 0, q 0), exact ties, and blocks
// holding inf or NaN (d NaN) among random rows, K = 160 (padded to 192). The arrays a route does not read
// (q, dx8: null) are left alone and the others keep their bits.
TEST(QuantGroups, ActivationQuantizationIsThePlainDefinitionOnEveryTarget) {
  const size_t T = 3, K = 160, ld8 = 192, nb = K / 32;
  std::vector<float> x(T * K);
  uint32_t s = 7;
  for (float& v : x) v = float(int32_t((s = s * 1664525u + 1013904223u) >> 8) % 20001 - 10000) / 997.f;
  std::fill(x.begin() + 32, x.begin() + 64, 0.f);  // row 0, block 1: zeros
  x[64] = 127.f, x[65] = 0.5f, x[66] = 1.5f, x[67] = -2.5f;  // row 0, block 2: d 1, ties to even
  for (size_t i = 68; i < 96; ++i) x[i] = 0.f;
  x[K + 40] = std::numeric_limits<float>::infinity();  // row 1, block 1
  x[2 * K + 130] = std::numeric_limits<float>::quiet_NaN();  // row 2, block 4
  testing::for_each_target([&](Target) {
    std::vector<int16_t> q(T * K, 99);
    std::vector<float> d(T * nb, -1.f), dsum16(T * 2 * nb, -1.f), dsum32(T * nb, -1.f), dx8(T * ld8 / 4, -1.f);
    std::vector<int32_t> xsum16(T * 2 * nb, -1);
    std::vector<int8_t> xs8(T * ld8, 99);
    quantize_activations(x.data(), T, K, QuantActivationsOut{.q = q.data(), .d = d.data(), .dsum16 = dsum16.data(),
                                                             .dsum32 = dsum32.data(), .xsum16 = xsum16.data(),
                                                             .xs8 = xs8.data(), .dx8 = dx8.data(), .xsum4_neg8 = nullptr,
                                                             .xsum4_neg128 = nullptr, .dxsum4 = nullptr, .ld8 = ld8});
    // Again without q and dx8 (the regrouped rows' arrays alone), into other buffers: the same bits.
    std::vector<float> d2(d.size(), -1.f), dsum16b(dsum16.size(), -1.f), dsum32b(dsum32.size(), -1.f);
    std::vector<int32_t> xsum16b(xsum16.size(), -1);
    std::vector<int8_t> xs8b(xs8.size(), 99);
    quantize_activations(x.data(), T, K, QuantActivationsOut{.q = nullptr, .d = d2.data(), .dsum16 = dsum16b.data(),
                                                             .dsum32 = dsum32b.data(), .xsum16 = xsum16b.data(),
                                                             .xs8 = xs8b.data(), .dx8 = nullptr, .xsum4_neg8 = nullptr,
                                                             .xsum4_neg128 = nullptr, .dxsum4 = nullptr, .ld8 = ld8});
    EXPECT_EQ(0, std::memcmp(d.data(), d2.data(), d.size() * 4));
    EXPECT_EQ(0, std::memcmp(dsum16.data(), dsum16b.data(), dsum16.size() * 4));
    EXPECT_EQ(0, std::memcmp(dsum32.data(), dsum32b.data(), dsum32.size() * 4));
    EXPECT_EQ(xsum16, xsum16b);
    EXPECT_EQ(xs8, xs8b);
    for (size_t t = 0; t < T; ++t) {
      for (size_t b = 0; b < nb; ++b) {
        const float* xb = x.data() + t * K + 32 * b;
        float amax = 0.f;
        bool finite = true;
        for (size_t i = 0; i < 32; ++i) {
          finite = finite && std::isfinite(xb[i]);
          amax = std::max(amax, std::fabs(xb[i]));
        }
        const float db = finite ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
        const float id = finite && db != 0.f ? 1.f / db : 0.f;
        const std::string at = "t=" + std::to_string(t) + " block " + std::to_string(b);
        EXPECT_TRUE(std::memcmp(&d[t * nb + b], &db, 4) == 0) << at << ": " << d[t * nb + b] << " vs " << db;
        if (!finite) continue;  // the products are NaN through d; the values of inf or NaN times 0 are no result
        int32_t sum[2] = {0, 0};
        for (size_t i = 0; i < 32; ++i) {
          const int32_t want = int32_t(std::nearbyint(xb[i] * id));
          sum[i / 16] += want;
          ASSERT_EQ(q[t * K + 32 * b + i], want) << at << " value " << i;
          ASSERT_EQ(xs8[t * ld8 + 32 * b + i], want) << at << " value " << i;
        }
        for (int h = 0; h < 2; ++h) {
          EXPECT_EQ(xsum16[t * 2 * nb + 2 * b + h], sum[h]) << at;
          const float ds = db * float(sum[h]);
          EXPECT_TRUE(std::memcmp(&dsum16[t * 2 * nb + 2 * b + h], &ds, 4) == 0) << at;
        }
        const float ds32 = db * float(sum[0] + sum[1]);
        EXPECT_TRUE(std::memcmp(&dsum32[t * nb + b], &ds32, 4) == 0) << at;
        for (size_t l = 0; l < 8; ++l) EXPECT_TRUE(std::memcmp(&dx8[t * ld8 / 4 + 8 * b + l], &db, 4) == 0) << at;
      }
      for (size_t k = K; k < ld8; ++k) EXPECT_EQ(xs8[t * ld8 + k], 0) << "padding t=" << t;
      for (size_t l = K / 4; l < ld8 / 4; ++l) EXPECT_EQ(dx8[t * ld8 / 4 + l], 0.f) << "padding t=" << t;
    }
  });
}

}  // namespace
}  // namespace attnzoo
