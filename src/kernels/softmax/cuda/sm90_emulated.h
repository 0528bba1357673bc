#pragma once
// sm90.cuh's instructions on the host, for the CTA emulator (testing/cuda_emulation/cta.h): what sm90.cuh
// includes in place of its inline PTX under ATTNZOO_CUDA_EMULATION. Same names and signatures; layouts as
// documented in sm90.cuh, every shared and global address bounds-checked. What is asynchronous on the GPU stays
// so here: a TMA copy's destination reads NaN until a wait on its mbarrier, a wgmma's accumulators read NaN
// until the wgmma.wait_group that covers it, and the product is formed at that wait from shared memory as it is
// then. A change to one file's signatures belongs in the other.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/softmax/cuda/sm80.cuh"
#include "kernels/softmax/cuda/tensor_map.h"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo::sm90 {

namespace emulated {
namespace emu = attnzoo::cuda_emulation;
enum Collective { kWgmma = 64 };  // + a code per shape and operand form, so mismatched ones fail

// The 128-byte swizzle on a shared address: its 16-byte chunk index XOR its row-of-8 index.
inline uint32_t swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

struct Descriptor {
  uint32_t start, leading, stride;
};
inline Descriptor decode(uint64_t d, const char* operand) {
  const Descriptor r{uint32_t(d & 0x3FFF) << 4, uint32_t((d >> 16) & 0x3FFF) << 4, uint32_t((d >> 32) & 0x3FFF) << 4};
  if ((d >> 62) != 1) emu::fail("wgmma %s: swizzle mode %u; only 128-byte (1) is emulated", operand, unsigned(d >> 62));
  if ((d >> 49) & 7) emu::fail("wgmma %s: a nonzero base offset is not emulated", operand);
  // Base offset 0 promises that each 8-row atom starts 1024-byte aligned: the start may only move within a row.
  if ((r.start >> 7) & 7) emu::fail("wgmma %s: start %u is not in the first row of a 1024-byte atom", operand, r.start);
  return r;
}
// Element (mn, k) of a K-major operand (k < 16 from the start) and of an MN-major one.
inline uint32_t k_major(const Descriptor& d, int mn, int k) {
  return swizzle128(d.start + uint32_t(mn / 8) * d.stride + uint32_t(mn % 8) * 128 + uint32_t(k) * 2);
}
inline uint32_t mn_major(const Descriptor& d, int mn, int k) {
  return swizzle128(d.start + uint32_t(mn / 64) * d.leading + uint32_t(k / 8) * d.stride + uint32_t(k % 8) * 128 +
                    uint32_t(mn % 64) * 2);
}
template <class Elem>
inline float shared_elem(uint32_t addr) {
  uint16_t bits;
  std::memcpy(&bits, emu::shared_at(addr, 2, "wgmma operand"), 2);
  return sm80::emulated::widen<Elem>(bits);
}

// The thread's accumulator rows within its warpgroup's 64 and the column pair it holds in each 8.
struct Place {
  int row0, t;
};
inline Place place() {
  const int tw = emu::thread_index() % 128, lane = tw % 32;
  return {16 * (tw / 32) + lane / 4, lane % 4};
}

// d[j][e] += sum_k A[row e/2][k] B[k][8j + 2t + e%2], accumulated in double and rounded once per instruction.
template <class Elem, int N, int TransB>
inline void multiply(float* value, const float (&a)[2][16], const Descriptor& b, Place at) {
  for (int j = 0; j < N / 8; ++j)
    for (int h = 0; h < 2; ++h) {
      const int col = 8 * j + 2 * at.t + h;
      float bcol[16];
      for (int k = 0; k < 16; ++k)
        bcol[k] = shared_elem<Elem>(TransB ? mn_major(b, col, k) : k_major(b, col, k));
      for (int r = 0; r < 2; ++r) {
        double s = value[4 * j + 2 * r + h];
        for (int k = 0; k < 16; ++k) s += double(a[r][k]) * double(bcol[k]);
        value[4 * j + 2 * r + h] = float(s);
      }
    }
}
}  // namespace emulated

inline void wgmma_fence() { cuda_emulation::wgmma_fence(); }
template <int Rows>
inline void fence_operand(float (&)[Rows][4]) {}
inline void wgmma_commit() { cuda_emulation::wgmma_commit(); }
template <int N>
inline void wgmma_wait() {
  cuda_emulation::wgmma_wait(N);
}

template <class Elem, int N, int TransB>
inline void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, int scale_d) {
  static_assert(N == 64 || N == 128 || N == 256);
  const unsigned char none = 0;
  cuda_emulation::warpgroup_exchange(&none, 1, emulated::kWgmma + N / 16 + TransB);
  const emulated::Descriptor da = emulated::decode(a, "A"), db = emulated::decode(b, "B");
  const emulated::Place at = emulated::place();
  cuda_emulation::wgmma_issue(&d[0][0], N / 2, scale_d != 0, [da, db, at](float* value) {
    float rows[2][16];
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 16; ++k) rows[r][k] = emulated::shared_elem<Elem>(emulated::k_major(da, at.row0 + 8 * r, k));
    emulated::multiply<Elem, N, TransB>(value, rows, db, at);
  });
}

// A's registers are read at the issue and must hold the same values at the covering wait.
template <class Elem, int N, int TransB>
inline void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, int scale_d) {
  static_assert(N == 64 || N == 128 || N == 256);
  const auto* all = reinterpret_cast<const uint32_t*>(
      cuda_emulation::warpgroup_exchange(a, sizeof a, emulated::kWgmma + 32 + N / 16 + TransB));
  const emulated::Descriptor db = emulated::decode(b, "B");
  const emulated::Place at = emulated::place();
  const int warp = (cuda_emulation::thread_index() % 128) / 32, g = at.row0 % 16;
  float rows[2][16];
  for (int t = 0; t < 4; ++t) {
    const uint32_t* s = all + (32 * warp + 4 * g + t) * 8;  // 32-byte slots
    for (int h = 0; h < 2; ++h) {
      auto half = [&](uint32_t x) { return sm80::emulated::widen<Elem>(uint16_t(h ? x >> 16 : x & 0xffff)); };
      rows[0][2 * t + h] = half(s[0]);
      rows[1][2 * t + h] = half(s[1]);
      rows[0][2 * t + 8 + h] = half(s[2]);
      rows[1][2 * t + 8 + h] = half(s[3]);
    }
  }
  // The GPU reads them asynchronously too: registers rewritten before the covering wait are a race, caught here.
  const uint32_t* regs = a;
  const std::array<uint32_t, 4> issued{a[0], a[1], a[2], a[3]};
  cuda_emulation::wgmma_issue(&d[0][0], N / 2, scale_d != 0, [rows, db, at, regs, issued](float* value) {
    for (int i = 0; i < 4; ++i)
      if (regs[i] != issued[i]) emulated::emu::fail("wgmma: A fragment registers changed before the wgmma.wait_group");
    emulated::multiply<Elem, N, TransB>(value, rows, db, at);
  });
}

inline void mbarrier_init(uint32_t bar, int count) { cuda_emulation::mbarrier_init(bar, count); }
inline void fence_barrier_init() {}
inline void mbarrier_arrive(uint32_t bar) { cuda_emulation::mbarrier_arrive(bar, 0); }
inline void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) { cuda_emulation::mbarrier_arrive(bar, bytes); }
inline void mbarrier_wait(uint32_t bar, uint32_t parity) { cuda_emulation::mbarrier_wait_parity(bar, parity); }
inline void fence_proxy_async() {}
inline void st_shared_u32(uint32_t addr, uint32_t value) {
  std::memcpy(cuda_emulation::shared_at(addr, 4, "st.shared.u32"), &value, 4);
}
inline uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t value;
  std::memcpy(&value, cuda_emulation::shared_at(addr, 4, "ld.shared.u32"), 4);
  return value;
}

namespace emulated {
// The box at `coords` into shared `dst`, row r (all outer box indices flattened, innermost first) at r * 128
// bytes with its chunks swizzled; elements outside the tensor are zeros.
inline void tma_load(uint32_t dst, const TensorMap& map, int rank, const int (&coords)[4], uint32_t bar) {
  if (map.rank != rank) emu::fail("cp.async.bulk.tensor.%dd on a map of rank %d", rank, map.rank);
  if (dst % 1024) emu::fail("cp.async.bulk.tensor: 128-byte swizzle needs a 1024-byte aligned destination, got %u", dst);
  if (map.box[0] * uint32_t(map.elem_bytes) != 128) emu::fail("cp.async.bulk.tensor: inner box of %u bytes", map.box[0] * map.elem_bytes);
  if (reinterpret_cast<uintptr_t>(map.base) % 16) emu::fail("tensor map: base %p not 16-byte aligned", map.base);
  size_t rows = 1;
  for (int i = 1; i < rank; ++i) {
    if (map.strides[i] % 16) emu::fail("tensor map: stride %d of %llu bytes", i, (unsigned long long)map.strides[i]);
    rows *= map.box[i];
  }
  cuda_emulation::bulk_copy(dst, rows * 128, bar, [dst, map, rank, coords, rows] {
    for (size_t r = 0; r < rows; ++r) {
      int64_t outer[4] = {0, 0, 0, 0};
      size_t rest = r;
      bool inside = true;
      int64_t offset = 0;
      for (int i = 1; i < rank; ++i) {
        outer[i] = coords[i] + int64_t(rest % map.box[i]);
        rest /= map.box[i];
        inside &= outer[i] >= 0 && uint64_t(outer[i]) < map.dims[i];
        offset += outer[i] * int64_t(map.strides[i]);
      }
      for (int e = 0; e < int(map.box[0]); ++e) {
        const int64_t x = coords[0] + e;
        unsigned char* to = emu::shared_at(swizzle128(dst + uint32_t(r) * 128 + uint32_t(e * map.elem_bytes)),
                                           size_t(map.elem_bytes), "TMA destination");
        if (inside && x >= 0 && uint64_t(x) < map.dims[0]) {
          const auto* from = static_cast<const unsigned char*>(map.base) + offset + x * map.elem_bytes;
          emu::check_global(from, size_t(map.elem_bytes), "TMA source");
          std::memcpy(to, from, size_t(map.elem_bytes));
        } else {
          std::memset(to, 0, size_t(map.elem_bytes));
        }
      }
    }
  });
}
}  // namespace emulated

inline void tma_load_2d(uint32_t dst, const TensorMap& map, int c0, int c1, uint32_t bar) {
  emulated::tma_load(dst, map, 2, {c0, c1, 0, 0}, bar);
}
inline void tma_load_3d(uint32_t dst, const TensorMap& map, int c0, int c1, int c2, uint32_t bar) {
  emulated::tma_load(dst, map, 3, {c0, c1, c2, 0}, bar);
}
inline void tma_load_4d(uint32_t dst, const TensorMap& map, int c0, int c1, int c2, int c3, uint32_t bar) {
  emulated::tma_load(dst, map, 4, {c0, c1, c2, c3}, bar);
}

inline void named_barrier_sync(int id, int threads) { cuda_emulation::named_barrier_sync(id, threads); }
inline void named_barrier_arrive(int id, int threads) { cuda_emulation::named_barrier_arrive(id, threads); }
template <int R>
inline void setmaxnreg_dec() {}
template <int R>
inline void setmaxnreg_inc() {}

}  // namespace attnzoo::sm90
