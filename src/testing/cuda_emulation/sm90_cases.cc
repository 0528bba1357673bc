// The emulated Hopper instructions (sm90_emulated.h) against plain loops: wgmma products through 128-byte
// swizzled K-major and MN-major shared operands and from registers, laid out here by the PTX ISA's formulas
// written independently of the emulator; TMA tiles with out-of-bounds edges; accumulators and copies that read
// NaN until their waits; an mbarrier ring over several phases; named barriers taking turns, and the mistakes
// with them that must fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/softmax/cuda/sm90.cuh"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceMemory;

std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = __float2bfloat16_rn(dist(rng)).bits;
  return v;
}

// Byte offset of 16-bit element `inner` of row `row` in a 1024-byte aligned region of 128-byte rows with the
// 128-byte swizzle: the row's 16-byte chunk c is stored at chunk c ^ (row % 8).
size_t swizzled(int row, int inner) {
  const int chunk = (inner * 2) / 16, within = (inner * 2) % 16;
  return size_t(row) * 128 + size_t((chunk ^ (row % 8)) * 16 + within);
}

// A (64 x 64, K-major) times B (64 x N, stored K-major: N rows of 64 k) in four k16 steps.
template <int N>
void check_ss() {
  SCOPED_TRACE(N);
  constexpr int K = 64;
  const std::vector<uint16_t> a = random_bf16(64 * K, 1), b = random_bf16(size_t(N) * K, 2);  // a[m][k], b[n][k]
  std::vector<float> got(64 * N, std::nanf(""));
  const uint32_t a_at = 0, b_at = 64 * 128;
  cuda_emulation::launch(dim3(1), 128, b_at + N * 128, [&](unsigned char* smem) {
    if (cuda_emulation::thread_index() == 0) {
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < K; ++k) std::memcpy(smem + a_at + swizzled(m, k), &a[size_t(m * K + k)], 2);
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k) std::memcpy(smem + b_at + swizzled(n, k), &b[size_t(n * K + k)], 2);
    }
    __syncthreads();
    float acc[N / 8][4];
    for (int kk = 0; kk < K / 16; ++kk) {
      sm90::wgmma_fence();
      sm90::wgmma_ss<__nv_bfloat16, N, 0>(acc, sm90::smem_descriptor(a_at + 32 * kk, 16, 1024),
                                          sm90::smem_descriptor(b_at + 32 * kk, 16, 1024), kk > 0);
      sm90::wgmma_commit();
      sm90::wgmma_wait<0>();
    }
    const int tid = cuda_emulation::thread_index(), lane = tid % 32, g = lane / 4, t = lane % 4;
    for (int j = 0; j < N / 8; ++j)
      for (int e = 0; e < 4; ++e) got[size_t((16 * (tid / 32) + g + 8 * (e / 2)) * N + 8 * j + 2 * t + e % 2)] = acc[j][e];
  });
  double worst = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += double(bf16_to_f32(a[size_t(m * K + k)])) * bf16_to_f32(b[size_t(n * K + k)]);
      worst = std::max(worst, std::fabs(got[size_t(m * N + n)] - want));
    }
  EXPECT_LE(worst, 1e-4);
}

TEST(EmulatedSm90, WgmmaFromSharedMatchesPlainProduct) {
  check_ss<64>();
  check_ss<128>();
  check_ss<256>();
}

// A from registers (the mma.m16n8k16 A fragment per warp) times B (K x N) stored MN-major: blocks of 64 columns
// `K * 128` bytes apart, each K rows of 128 bytes.
template <int N>
void check_rs() {
  SCOPED_TRACE(N);
  constexpr int K = 32;
  const std::vector<uint16_t> a = random_bf16(64 * K, 3), b = random_bf16(size_t(K) * N, 4);  // a[m][k], b[k][n]
  std::vector<float> got(64 * N, std::nanf(""));
  cuda_emulation::launch(dim3(1), 128, N / 64 * K * 128, [&](unsigned char* smem) {
    if (cuda_emulation::thread_index() == 0)
      for (int k = 0; k < K; ++k)
        for (int n = 0; n < N; ++n)
          std::memcpy(smem + size_t(n / 64) * K * 128 + swizzled(k, n % 64), &b[size_t(k * N + n)], 2);
    __syncthreads();
    const int tid = cuda_emulation::thread_index(), lane = tid % 32, g = lane / 4, t = lane % 4, m0 = 16 * (tid / 32);
    auto pair = [&](int m, int k) { return uint32_t(a[size_t(m * K + k)]) | uint32_t(a[size_t(m * K + k + 1)]) << 16; };
    float acc[N / 8][4];
    for (int kk = 0; kk < K / 16; ++kk) {
      const int k = 16 * kk + 2 * t;
      const uint32_t frag[4] = {pair(m0 + g, k), pair(m0 + g + 8, k), pair(m0 + g, k + 8), pair(m0 + g + 8, k + 8)};
      sm90::wgmma_fence();
      sm90::wgmma_rs<__nv_bfloat16, N, 1>(acc, frag, sm90::smem_descriptor(16 * 128 * kk, K * 128, 1024), kk > 0);
      sm90::wgmma_commit();
      sm90::wgmma_wait<0>();
    }
    for (int j = 0; j < N / 8; ++j)
      for (int e = 0; e < 4; ++e) got[size_t((m0 + g + 8 * (e / 2)) * N + 8 * j + 2 * t + e % 2)] = acc[j][e];
  });
  double worst = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += double(bf16_to_f32(a[size_t(m * K + k)])) * bf16_to_f32(b[size_t(k * N + n)]);
      worst = std::max(worst, std::fabs(got[size_t(m * N + n)] - want));
    }
  EXPECT_LE(worst, 1e-4);
}

TEST(EmulatedSm90, WgmmaFromRegistersWithMnMajorBMatchesPlainProduct) {
  check_rs<64>();
  check_rs<128>();
  check_rs<256>();
}

// The accumulators are unreadable (NaN) between the issue and the covering wait; wait_group<1> leaves the
// newest group in flight.
TEST(EmulatedSm90, AccumulatorsReadNaNUntilTheirWait) {
  const std::vector<uint16_t> ones(64 * 64, __float2bfloat16_rn(1.f).bits);
  int nan_before = 0, nan_after_first = 0, nan_after = 0;
  cuda_emulation::launch(dim3(1), 128, 2 * 64 * 128, [&](unsigned char* smem) {
    if (cuda_emulation::thread_index() == 0) std::memcpy(smem, ones.data(), 2 * 64 * 64), std::memcpy(smem + 8192, ones.data(), 2 * 64 * 64);
    __syncthreads();
    float x[8][4], y[8][4];
    const uint64_t da = sm90::smem_descriptor(0, 16, 1024), db = sm90::smem_descriptor(8192, 16, 1024);
    sm90::wgmma_fence();
    sm90::wgmma_ss<__nv_bfloat16, 64, 0>(x, da, db, 0);
    sm90::wgmma_commit();
    sm90::wgmma_ss<__nv_bfloat16, 64, 0>(y, da, db, 0);
    sm90::wgmma_commit();
    nan_before += std::isnan(x[0][0]) && std::isnan(y[7][3]);
    sm90::wgmma_wait<1>();
    nan_after_first += !std::isnan(x[0][0]) && std::isnan(y[7][3]);
    sm90::wgmma_wait<0>();
    nan_after += x[3][1] == 16.f && y[7][3] == 16.f;
  });
  EXPECT_EQ(nan_before, 128);
  EXPECT_EQ(nan_after_first, 128);
  EXPECT_EQ(nan_after, 128);
}

// A 3-D box [4 tokens][1 head][64 dims] over a [5][3][80] tensor at its far corner: dims 80.. and tokens 5.. are
// outside and land as zeros; the rest is the tensor's, swizzled; before the wait the box reads NaN.
TEST(EmulatedSm90, TmaTileZeroFillsOutOfBoundsAndSwizzles) {
  constexpr int T = 5, H = 3, D = 80;
  const std::vector<uint16_t> x = random_bf16(T * H * D, 5);
  DeviceMemory global(x.size() * 2);
  std::memcpy(global.data(), x.data(), x.size() * 2);
  sm90::TensorMapSpec spec;
  spec.base = global.data();
  spec.rank = 3;
  spec.dims[0] = D, spec.dims[1] = H, spec.dims[2] = T;
  spec.strides[1] = D * 2, spec.strides[2] = H * D * 2;
  spec.box[0] = 64, spec.box[1] = 1, spec.box[2] = 4;
  const sm90::TensorMap map = sm90::encode_tensor_map(spec);
  std::vector<unsigned char> box(4 * 128);
  bool poisoned = false;
  cuda_emulation::launch(dim3(1), 32, 2048, [&](unsigned char* smem) {
    const uint32_t bar = 1024 + 512;
    if (cuda_emulation::thread_index() == 0) {
      sm90::mbarrier_init(bar, 1);
      sm90::mbarrier_arrive_expect_tx(bar, 4 * 128);
      sm90::tma_load_3d(1024, map, 64, 2, 3, bar);
      poisoned = std::isnan(bf16_to_f32(uint16_t(smem[1024] | smem[1025] << 8)));
      sm90::mbarrier_wait(bar, 0);
      std::memcpy(box.data(), smem + 1024, box.size());
    }
  });
  EXPECT_TRUE(poisoned);
  for (int r = 0; r < 4; ++r)
    for (int e = 0; e < 64; ++e) {
      const int t = 3 + r, d = 64 + e;
      uint16_t got;
      std::memcpy(&got, box.data() + swizzled(r, e), 2);
      const uint16_t want = t < T && d < D ? x[size_t((t * H + 2) * D + d)] : 0;
      ASSERT_EQ(got, want) << "row " << r << " element " << e;
    }
}

// A two-stage ring over six phases: one producer thread refills a stage by TMA once both consumer warpgroups
// have released it (empty barrier, 256 arrivals), the consumers wait on its full barrier and check the tile.
// Each consumer warpgroup also syncs alone (bar.sync 1 / 2, 128 threads) before releasing.
TEST(EmulatedSm90, MbarrierRingPassesTilesThroughPhases) {
  constexpr int kTiles = 6;
  std::vector<uint16_t> x = random_bf16(kTiles * 8 * 64, 6);
  DeviceMemory global(x.size() * 2);
  std::memcpy(global.data(), x.data(), x.size() * 2);
  sm90::TensorMapSpec spec;
  spec.base = global.data();
  spec.rank = 2;
  spec.dims[0] = 64, spec.dims[1] = kTiles * 8;
  spec.strides[1] = 128;
  spec.box[0] = 64, spec.box[1] = 8;
  const sm90::TensorMap map = sm90::encode_tensor_map(spec);
  int seen = 0, wrong = 0;
  for (uint64_t seed : {1, 2, 3}) {
    cuda_emulation::seed_schedule(seed);
    cuda_emulation::launch(dim3(1), 384, 3 * 1024, [&](unsigned char* smem) {
      const int tid = cuda_emulation::thread_index();
      const uint32_t full[2] = {2048, 2056}, empty[2] = {2064, 2072};
      if (tid == 0)
        for (int s = 0; s < 2; ++s) sm90::mbarrier_init(full[s], 1), sm90::mbarrier_init(empty[s], 256);
      __syncthreads();
      if (tid < 128) {
        if (tid == 0)
          for (int i = 0; i < kTiles; ++i) {
            sm90::mbarrier_wait(empty[i % 2], ((i / 2) & 1) ^ 1);
            sm90::mbarrier_arrive_expect_tx(full[i % 2], 1024);
            sm90::tma_load_2d(uint32_t(1024 * (i % 2)), map, 0, 8 * i, full[i % 2]);
          }
        return;
      }
      for (int i = 0; i < kTiles; ++i) {
        sm90::mbarrier_wait(full[i % 2], (i / 2) & 1);
        const int row = (tid - 128) % 8, e = (tid - 128) / 4 % 64;
        uint16_t got;
        std::memcpy(&got, smem + 1024 * (i % 2) + swizzled(row, e), 2);
        wrong += got != x[size_t((8 * i + row) * 64 + e)];
        ++seen;
        sm90::named_barrier_sync(tid < 256 ? 1 : 2, 128);
        sm90::mbarrier_arrive(empty[i % 2]);
      }
    });
  }
  EXPECT_EQ(seen, 3 * 256 * kTiles);
  EXPECT_EQ(wrong, 0);
}

// Two warpgroups taking turns as the Hopper prefill's consumers do (prefill_sm90_tile.cuh): each waits at its
// own barrier (bar.sync, 256 threads) and hands the turn over with bar.arrive at the other's. `pingpong` false
// leaves the barriers out, to show that the check below sees overlapping turns when nothing orders them.
struct Turns {
  int overlaps = 0, turns = 0;
};
Turns take_turns(bool pingpong, int rounds, uint64_t seed) {
  cuda_emulation::seed_schedule(seed);
  Turns r;
  int inside[2] = {0, 0};
  cuda_emulation::launch(dim3(1), 256, 0, [&](unsigned char*) {
    const int tid = cuda_emulation::thread_index(), wg = tid / 128;
    if (pingpong && wg == 1) sm90::named_barrier_arrive(1, 256);  // warpgroup 0 goes first
    for (int i = 0; i < rounds; ++i) {
      if (pingpong) sm90::named_barrier_sync(1 + wg, 256);
      ++inside[wg];
      r.overlaps += inside[1 - wg] > 0;
      const unsigned char none = 0;
      cuda_emulation::warp_exchange(&none, 1, 7);  // other warps run here
      --inside[wg];
      ++r.turns;
      if (pingpong && !(wg == 1 && i + 1 == rounds)) sm90::named_barrier_arrive(2 - wg, 256);
    }
  });
  return r;
}

TEST(EmulatedSm90, NamedBarriersMakeTwoWarpgroupsTakeTurns) {
  for (uint64_t seed : {1, 2, 3}) {
    const Turns ordered = take_turns(true, 5, seed);
    EXPECT_EQ(ordered.turns, 2 * 128 * 5);
    EXPECT_EQ(ordered.overlaps, 0);
  }
  EXPECT_GT(take_turns(false, 5, 1).overlaps, 0);
}

// The ways a ping-pong goes wrong fail instead of running on: a hand-over left out deadlocks, counts that
// disagree or that the threads cannot meet fail, and so does a hand-over nobody collects.
TEST(EmulatedSm90DeathTest, NamedBarrierMistakesFail) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [](auto body) {
    cuda_emulation::launch(dim3(1), 256, 8, [&](unsigned char*) { body(cuda_emulation::thread_index() / 128); });
  };
  // Warpgroup 1 never hands the turn back: warpgroup 0's second wait never ends.
  EXPECT_DEATH(run([](int wg) {
                 if (wg == 1) return sm90::named_barrier_sync(2, 256);
                 sm90::named_barrier_arrive(2, 256);
                 sm90::named_barrier_sync(1, 256);
               }),
               "deadlock");
  // The waiters count one warpgroup, the arrivers both.
  EXPECT_DEATH(run([](int wg) {
                 if (wg == 0) sm90::named_barrier_sync(1, 128);
                 else sm90::named_barrier_arrive(1, 256);
               }),
               "others said|when the CTA ends");
  // Both sides say 128: the waiters pass alone (warpgroup 1 arrives only once they have, by an mbarrier), and
  // the arrivals complete a phase nobody waits at.
  EXPECT_DEATH(run([](int wg) {
                 if (cuda_emulation::thread_index() == 0) sm90::mbarrier_init(0, 128);
                 __syncthreads();
                 if (wg == 0) {
                   sm90::named_barrier_sync(1, 128);
                   sm90::mbarrier_arrive(0);
                 } else {
                   sm90::mbarrier_wait(0, 0);
                   sm90::named_barrier_arrive(1, 128);
                 }
               }),
               "no thread waiting");
  // A count above the threads taking part (the CTA's third warpgroup, the producer's place, never comes): the
  // phase never completes.
  EXPECT_DEATH(cuda_emulation::launch(dim3(1), 384, 0,
                                      [](unsigned char*) {
                                        const int wg = cuda_emulation::thread_index() / 128;
                                        if (wg == 0) sm90::named_barrier_sync(1, 384);
                                        if (wg == 1) sm90::named_barrier_arrive(1, 384);
                                      }),
               "deadlock|when the CTA ends");
  // One hand-over too many: its phase is still open when the CTA ends (or, if the thread is quick enough, it
  // arrives twice in the first phase).
  EXPECT_DEATH(run([](int wg) {
                 if (wg == 0) return sm90::named_barrier_sync(1, 256);
                 sm90::named_barrier_arrive(1, 256);
                 sm90::named_barrier_arrive(1, 256);
               }),
               "when the CTA ends|arrives twice");
}

}  // namespace
}  // namespace attnzoo
