// The AMX blocking (amx_pair_gemm-inl.h) on a plain C++ model of the tile registers, on any CPU; on AMX CPUs the
// tile registers themselves against that model, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/amx.h"
#include "core/dispatch.h"
#include "core/dtype.h"
#include "kernels/common/amx_pair_gemm-inl.h"
#include "kernels/common/bf16_dot.h"

namespace attnzoo {
namespace {

// tdpbf16ps as an Emerald Rapids core computes it, read off the hardware (500 random 16x16x16 tiles, every
// element equal): the even-indexed and the odd-indexed products of the 16 pairs each summed from zero in an f32
// chain of fused multiply-adds, then (even + odd) added to the accumulator. Denormal inputs read as zero and
// denormal results flush to zero, as Intel's definition says. Other AMX generations may round differently, so
// the hardware test below allows the last bits.
float daz(uint16_t bits) {
  const float f = bf16_to_f32(bits);
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.f, f) : f;
}
float ftz(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.f, f) : f; }

struct ModelTiles {
  struct Tile {
    int rows = 0;
    uint32_t data[16][16] = {};  // 64 bytes a row: 16 pairs or 16 f32
  };
  Tile reg[8];
  int configures = 0;
  void configure(int r0, int r1) {
    ++configures;
    for (int i : {0, 1, 4}) reg[i].rows = r0;
    for (int i : {2, 3, 5}) reg[i].rows = r1;
    reg[6].rows = reg[7].rows = 16;
    for (Tile& t : reg) std::memset(t.data, 0, sizeof(t.data));  // ldtilecfg zeroes the tiles
  }
  Tile& used(int i) {
    EXPECT_GT(reg[i].rows, 0) << "tile " << i << " used while unconfigured";
    return reg[i];
  }
  template <int I>
  void zero() {
    std::memset(used(I).data, 0, sizeof(reg[I].data));
  }
  template <int I>
  void load(const void* p, size_t stride) {
    Tile& t = used(I);
    for (int r = 0; r < t.rows; ++r) std::memcpy(t.data[r], static_cast<const char*>(p) + r * stride, 64);
  }
  template <int I>
  void store(void* p, size_t stride) {
    Tile& t = used(I);
    for (int r = 0; r < t.rows; ++r) std::memcpy(static_cast<char*>(p) + r * stride, t.data[r], 64);
  }
  template <int Ic, int Ia, int Ib>
  void dp() {
    Tile &c = used(Ic), &a = used(Ia), &b = used(Ib);
    EXPECT_EQ(c.rows, a.rows);
    for (int m = 0; m < c.rows; ++m)
      for (int n = 0; n < 16; ++n) {
        float acc, even = 0.f, odd = 0.f;
        std::memcpy(&acc, &c.data[m][n], 4);
        for (int k = 0; k < 16; ++k) {
          const uint32_t pa = a.data[m][k], pb = b.data[k][n];
          even = ftz(std::fma(daz(uint16_t(pa)), daz(uint16_t(pb)), even));
          odd = ftz(std::fma(daz(uint16_t(pa >> 16)), daz(uint16_t(pb >> 16)), odd));
        }
        acc = ftz(acc + ftz(even + odd));
        std::memcpy(&c.data[m][n], &acc, 4);
      }
  }
};

uint32_t pair(float lo, float hi) { return uint32_t(f32_to_bf16(lo)) | uint32_t(f32_to_bf16(hi)) << 16; }

struct Case {
  size_t M, N, K2;
};

struct Operands {
  size_t lda, ldb, ldc;
  std::vector<uint32_t> A, B;
  std::vector<float> C;
  Operands(const Case& c, std::mt19937& rng) : lda(c.K2 + 3), ldb(c.N + 16), ldc(c.N + 5) {
    std::normal_distribution<float> nd;
    A.resize(c.M * lda);
    B.resize(c.K2 * ldb);
    C.resize(c.M * ldc);
    // NaN beyond each row of A: a tile load that read past a row would poison the sums (NaN * 0 is NaN).
    const float nan = std::nanf("");
    for (size_t m = 0; m < c.M; ++m)
      for (size_t k = 0; k < lda; ++k) A[m * lda + k] = k < c.K2 ? pair(nd(rng), nd(rng)) : pair(nan, nan);
    for (auto& b : B) b = pair(nd(rng), nd(rng));
    for (auto& x : C) x = nd(rng);
  }
};

double reference(const Operands& o, size_t K2, size_t m, size_t n, bool accumulate) {
  double s = accumulate ? o.C[m * o.ldc + n] : 0.0;
  for (size_t k = 0; k < K2; ++k) {
    const uint32_t a = o.A[m * o.lda + k], b = o.B[k * o.ldb + n];
    s += double(bf16_to_f32(uint16_t(a))) * bf16_to_f32(uint16_t(b)) +
         double(bf16_to_f32(uint16_t(a >> 16))) * bf16_to_f32(uint16_t(b >> 16));
  }
  return s;
}

const std::vector<Case> kCases = {{1, 16, 1},   {5, 48, 15},   {16, 16, 16},  {17, 32, 17}, {31, 80, 64},
                                  {32, 32, 32}, {33, 64, 100}, {70, 112, 9},  {64, 128, 64}, {3, 16, 200}};

void run_model(const Case& c, Operands& o, bool accumulate, int* configures = nullptr) {
  ModelTiles tiles;
  std::vector<uint32_t> a_tail(c.M * 16), b_tail(16 * c.N);
  amx_detail::pair_gemm(tiles, c.M, c.N, c.K2, o.A.data(), o.lda, o.B.data(), o.ldb, o.C.data(), o.ldc, accumulate,
                        a_tail.data(), b_tail.data());
  if (configures) *configures = tiles.configures;
}

// The blocking covers every element once, with every pair, and writes nothing outside C's M x N.
TEST(AmxPairGemm, BlockingMatchesTheDefinition) {
  std::mt19937 rng(7);
  for (const Case& c : kCases)
    for (bool accumulate : {false, true}) {
      Operands o(c, rng);
      const Operands before = o;
      run_model(c, o, accumulate);
      for (size_t m = 0; m < c.M; ++m)
        for (size_t n = 0; n < o.ldc; ++n) {
          const float got = o.C[m * o.ldc + n];
          if (n >= c.N) {
            ASSERT_EQ(got, before.C[m * o.ldc + n]) << "wrote past N at m=" << m << " n=" << n;
            continue;
          }
          const double want = reference(before, c.K2, m, n, accumulate);
          ASSERT_NEAR(got, want, 1e-5 * (1 + 2 * double(c.K2)))
              << c.M << "x" << c.N << "x" << c.K2 << " m=" << m << " n=" << n << " acc=" << accumulate;
        }
    }
}

// One configuration for the whole rows, one more only where the last group of rows is ragged.
TEST(AmxPairGemm, ConfiguresOnlyForARaggedLastGroup) {
  std::mt19937 rng(3);
  int configures = 0;
  Operands even({96, 32, 16}, rng);
  run_model({96, 32, 16}, even, false, &configures);
  EXPECT_EQ(configures, 1);
  Operands ragged({70, 32, 16}, rng);
  run_model({70, 32, 16}, ragged, false, &configures);
  EXPECT_EQ(configures, 2);
}

// The projection's use of one block (linear_amx_gemm_amx.cc): C starts from a bias broadcast along the columns
// ([32][16], col_step 0) and is stored to a buffer of its own pitch. The sums are pair_gemm's accumulating onto C
// pre-filled with the bias, bit for bit; only the tiles the block's shape covers are stored.
TEST(AmxPairGemm, ABlockStartsFromABroadcastBiasAndStoresWhereTold) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd;
  for (size_t rows : {size_t(32), size_t(20), size_t(16), size_t(5)})
    for (size_t cols : {size_t(32), size_t(16)})
      for (size_t K2 : {size_t(16), size_t(48), size_t(40)}) {
        const Case c{rows, 32, K2};
        Operands o(c, rng);
        std::vector<float> bias(32), init(32 * 16);
        for (size_t r = 0; r < 32; ++r) {
          bias[r] = nd(rng);
          std::fill_n(init.begin() + long(r * 16), 16, bias[r]);
        }
        const size_t ld_stage = 40;
        const float sentinel = -7.f;
        std::vector<float> stage(32 * ld_stage, sentinel);
        std::vector<uint32_t> a_tail(32 * 16), b_tail(16 * 32);
        // The tail copies pair_gemm would make for a ragged reduction.
        const size_t full = K2 / 16 * 16;
        for (size_t m = 0; m < rows; ++m)
          for (size_t k = 0; k < 16; ++k) a_tail[m * 16 + k] = full + k < K2 ? o.A[m * o.lda + full + k] : 0u;
        for (size_t k = 0; k < 16; ++k)
          for (size_t n = 0; n < 32; ++n) b_tail[k * 32 + n] = full + k < K2 ? o.B[(full + k) * o.ldb + n] : 0u;
        ModelTiles tiles;
        const int r0 = int(std::min<size_t>(16, rows)), r1 = int(rows > 16 ? rows - 16 : 0);
        tiles.configure(r0, r1);
        amx_detail::block(tiles, r1 > 0, cols > 16, K2, o.A.data(), o.lda, o.B.data(), o.ldb, a_tail.data(),
                          b_tail.data(), 32, amx_detail::BlockStart{init.data(), 16, 0}, stage.data(), ld_stage);
        // pair_gemm accumulating onto the bias: the same pair products in the same order.
        Operands want = o;
        for (size_t m = 0; m < rows; ++m)
          for (size_t n = 0; n < o.ldc; ++n) want.C[m * o.ldc + n] = bias[m];
        run_model({rows, cols, K2}, want, /*accumulate=*/true);
        for (size_t m = 0; m < 32; ++m)
          for (size_t n = 0; n < ld_stage; ++n) {
            const float got = stage[m * ld_stage + n];
            if (m >= rows || n >= cols) {
              ASSERT_EQ(got, sentinel) << "stored outside the block at " << m << "," << n;
              continue;
            }
            ASSERT_EQ(got, want.C[m * o.ldc + n]) << rows << "x" << cols << "x" << K2 << " at " << m << "," << n;
            ASSERT_NEAR(got, bias[m] + reference(o, K2, m, n, false), 1e-5 * (1 + 2 * double(K2)));
          }
      }
}

// The tile registers compute what the model computes (bit for bit on Emerald Rapids; within a few units in the
// last place of the sum's magnitude elsewhere); the public entry takes the tiles here.
TEST(AmxPairGemm, TileRegistersEqualTheModel) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "no AMX-BF16 here (" << amx_support().reason << ")";
  std::mt19937 rng(11);
  for (const Case& c : kCases)
    for (bool accumulate : {false, true}) {
      Operands model(c, rng);
      Operands hw = model, entry = model;
      run_model(c, model, accumulate);
      bf16_pair_gemm_amx(c.M, c.N, c.K2, hw.A.data(), hw.lda, hw.B.data(), hw.ldb, hw.C.data(), hw.ldc, accumulate);
      bf16_pair_gemm(c.M, c.N, c.K2, entry.A.data(), entry.lda, entry.B.data(), entry.ldb, entry.C.data(),
                     entry.ldc, accumulate);
      size_t differ = 0;
      for (size_t m = 0; m < c.M; ++m)
        for (size_t n = 0; n < model.ldc; ++n) {
          const size_t i = m * model.ldc + n;
          const double scale = 1 + std::fabs(model.C[i]) + 4 * double(c.K2);
          ASSERT_NEAR(hw.C[i], model.C[i], 1e-6 * scale) << c.M << "x" << c.N << "x" << c.K2 << " at " << i;
          ASSERT_EQ(entry.C[i], hw.C[i]) << "bf16_pair_gemm did not take the tiles";
          differ += hw.C[i] != model.C[i];
        }
      RecordProperty("elements_differing_from_the_model", int(differ));
      if (differ) std::printf("%zux%zux%zu: %zu elements differ from the model in the last bits\n", c.M, c.N, c.K2, differ);
    }
}

// A row's result does not depend on the rows beside it (the batch-invariance the engine promises).
TEST(AmxPairGemm, ARowDoesNotDependOnTheOtherRows) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "no AMX-BF16 here (" << amx_support().reason << ")";
  std::mt19937 rng(5);
  const Case big{45, 64, 40};
  Operands all(big, rng);
  Operands one = all;
  bf16_pair_gemm_amx(big.M, big.N, big.K2, all.A.data(), all.lda, all.B.data(), all.ldb, all.C.data(), all.ldc,
                     false);
  for (size_t m : {size_t(0), size_t(17), size_t(44)}) {
    bf16_pair_gemm_amx(1, big.N, big.K2, one.A.data() + m * one.lda, one.lda, one.B.data(), one.ldb,
                       one.C.data() + m * one.ldc, one.ldc, false);
    for (size_t n = 0; n < big.N; ++n) ASSERT_EQ(one.C[m * one.ldc + n], all.C[m * all.ldc + n]) << m << "," << n;
  }
}

// Another library in the same thread (oneDNN under torch's bf16 SDPA) configures the tiles its own way and
// releases them when done; after a release any tile load is an illegal instruction. The next product must read
// the registers' state rather than remember what it configured last.
TEST(AmxPairGemm, AnotherLibrarysTileStateIsNotAssumed) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "no AMX-BF16 here (" << amx_support().reason << ")";
  std::mt19937 rng(13);
  const Case c{32, 64, 100};  // one shape throughout: a remembered configuration would never be re-loaded
  const Operands inputs(c, rng);
  Operands first = inputs;
  bf16_pair_gemm_amx(c.M, c.N, c.K2, first.A.data(), first.lda, first.B.data(), first.ldb, first.C.data(),
                     first.ldc, false);
  AmxTileConfig foreign;  // every register 8 rows of 32 bytes: loads and products would cover a quarter of a tile
  for (int t = 0; t < 8; ++t) foreign.set(t, 8, 32);
  for (int disturbance = 0; disturbance < 2; ++disturbance) {
    if (disturbance == 0)
      __asm__ volatile("tilerelease" ::: "memory");
    else
      __asm__ volatile("ldtilecfg %0" ::"m"(foreign) : "memory");
    Operands again = inputs;
    bf16_pair_gemm_amx(c.M, c.N, c.K2, again.A.data(), again.lda, again.B.data(), again.ldb, again.C.data(),
                       again.ldc, false);
    ASSERT_EQ(again.C, first.C) << (disturbance == 0 ? "after tilerelease" : "after a foreign ldtilecfg");
  }
}

}  // namespace
}  // namespace attnzoo
