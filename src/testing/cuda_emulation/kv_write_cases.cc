// The CUDA paged KV write (kernels/softmax/cuda/kv_write_kernel.cuh) under the CTA emulator against its CPU twin,
// write_paged_rows (kv_write.h) run on a copy of the same bytes: every cache byte and every scale must come out
// bit-identical, the padding between rows, heads and blocks and the slots nobody writes included. Every row dtype
// into every cache dtype, [T, H, D] rows and MLA's [T, D] latent rows, odd head_dims and block sizes, padded
// strides on both sides, skipped (-1) slots, and quantized rows that are zero, too small to scale, hold a NaN or
// an Inf, or sit on e4m3's subnormals. The grid is capped at three blocks so that the row loop takes several
// rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/softmax/cuda/kv_write_kernel.cuh"
#include "kernels/softmax/kv_write.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_kv_write;
using cuda_emulation::DeviceMemory;
using cuda_emulation::StridedOperand;

template <class Fn>
void with_row_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(__nv_bfloat16{});
    default: return fn(__half{});
  }
}

template <class Fn>
void with_cache_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::i8: return fn(int8_t{});
    case DType::f8_e4m3: return fn(Fp8E4M3{});
    default: return with_row_type(t, fn);
  }
}

// A strided view over `bytes` (element strides), as the CPU twin takes it.
TensorView view_over(std::vector<uint8_t>& bytes, DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides) {
  TensorView v;
  v.data = bytes.data();
  v.dtype = dtype;
  v.ndim = int(shape.size());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[size_t(d)] = shape[size_t(d)];
    v.strides[size_t(d)] = strides[size_t(d)];
  }
  return v;
}

// Contiguous strides of `shape` with `pad` spare elements after each row of the last `pad.size()` dims.
std::vector<int64_t> padded_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& pad) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    s[size_t(d)] = stride;
    stride = stride * shape[size_t(d)] + (size_t(d) < pad.size() ? pad[size_t(d)] : 0);
  }
  return s;
}

int64_t extent_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t e = 1;
  for (size_t d = 0; d < shape.size(); ++d) e += (shape[d] - 1) * strides[d];
  return e;
}

enum class Rows { random, special };  // special: zero / tiny / NaN / Inf / subnormal-scaled rows mixed in

struct KvCase {
  int64_t T, H, D, num_blocks, block_size;
  DType rows_dtype, cache_dtype;
  bool heads = true;     // [T, H, D]; false: [T, D] (MLA's latent), H must be 1
  int64_t row_pad = 0;   // spare elements after each row (and head) of the rows
  int64_t cache_pad = 0; // spare elements after each head / slot of the cache
  Rows rows = Rows::random;
  bool past = false;  // every 7th token's slot past the cache: the unchecked kernel skips it (the CPU sees -1)
};

void check_kv_write(const KvCase& c) {
  SCOPED_TRACE(std::string(dtype_name(c.rows_dtype)) + " -> " + dtype_name(c.cache_dtype) + " T " +
               std::to_string(c.T) + " H " + std::to_string(c.H) + " D " + std::to_string(c.D) + " blocks " +
               std::to_string(c.num_blocks) + "x" + std::to_string(c.block_size) + (c.heads ? "" : " latent") +
               " pads " + std::to_string(c.row_pad) + "/" + std::to_string(c.cache_pad) +
               (c.rows == Rows::special ? " special rows" : "") + (c.past ? " slots past the cache" : ""));
  const std::vector<int64_t> row_shape = c.heads ? std::vector<int64_t>{c.T, c.H, c.D} : std::vector<int64_t>{c.T, c.D};
  std::vector<int64_t> row_strides = c.heads ? std::vector<int64_t>{(c.D + c.row_pad) * c.H + 3, c.D + c.row_pad, 1}
                                             : std::vector<int64_t>{c.D + c.row_pad, 1};
  StridedOperand rows(c.rows_dtype, row_shape, 11 + uint64_t(c.D), row_strides, 1.5f);
  if (c.rows == Rows::special) {
    const int64_t H = c.heads ? c.H : 1;
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = t * row_strides[0] + (c.heads ? h * row_strides[1] : 0);
        const int64_t kind = (t * H + h) % 7;
        for (int64_t d = 0; d < c.D; ++d) {
          const float x = rows.at(base + d);
          float v = x;
          if (kind == 0) v = 0.f;                                      // zero row: scale 0
          if (kind == 1) v = x * 1e-39f;                               // amax / qmax below FLT_MIN: zeros
          if (kind == 2 && d == c.D / 2) v = NAN;                      // NaN scale
          if (kind == 3 && d == 0) v = -INFINITY;                      // NaN scale too
          if (kind == 4) v = d == 1 ? 448.f : x * 1e-3f;               // most of the row on e4m3's subnormals
          if (kind == 5) v = std::round(x * 8.f) / 8.f + (d == 0 ? 2.f : 0.f);  // exact halves: rounding ties
          rows.set(base + d, v);
        }
      }
    rows.upload();
  }

  // The cache (and scale) bytes start as the same noise on both sides, padding included.
  const std::vector<int64_t> cache_shape = c.heads ? std::vector<int64_t>{c.num_blocks, c.block_size, c.H, c.D}
                                                   : std::vector<int64_t>{c.num_blocks, c.block_size, c.D};
  const std::vector<int64_t> cache_strides = padded_strides(cache_shape, std::vector<int64_t>(cache_shape.size(), c.cache_pad));
  const size_t cache_bytes = size_t(extent_of(cache_shape, cache_strides)) * dtype_size(c.cache_dtype) + 16;
  const bool quantized = c.cache_dtype == DType::i8 || c.cache_dtype == DType::f8_e4m3;
  const std::vector<int64_t> scale_shape(cache_shape.begin(), cache_shape.end() - 1);
  const std::vector<int64_t> scale_strides = padded_strides(scale_shape, std::vector<int64_t>(scale_shape.size(), 1));
  const size_t scale_bytes = quantized ? size_t(extent_of(scale_shape, scale_strides)) * 4 + 16 : 0;
  std::vector<uint8_t> want_cache(cache_bytes), want_scale(scale_bytes);
  std::mt19937_64 rng(7 + uint64_t(c.T));
  for (auto& b : want_cache) b = uint8_t(rng());
  for (auto& b : want_scale) b = uint8_t(rng());
  DeviceMemory cache(cache_bytes), scale(std::max<size_t>(scale_bytes, 16));
  std::memcpy(cache.data(), want_cache.data(), cache_bytes);
  if (quantized) std::memcpy(scale.data(), want_scale.data(), scale_bytes);

  // Distinct slots shuffled over the whole cache, every 5th token skipped.
  const int64_t num_slots = c.num_blocks * c.block_size;
  std::vector<int64_t> slots(static_cast<size_t>(num_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(3 + uint64_t(c.D)));
  slots.resize(size_t(c.T));
  for (int64_t t = 4; t < c.T; t += 5) slots[size_t(t)] = -1;
  std::vector<int64_t> device_slots = slots;
  if (c.past)
    for (int64_t t = 3; t < c.T; t += 7) device_slots[size_t(t)] = num_slots + t, slots[size_t(t)] = -1;
  DeviceMemory slot_mapping(slots.size() * sizeof(int64_t) + 8);
  std::memcpy(slot_mapping.data(), device_slots.data(), slots.size() * sizeof(int64_t));

  with_row_type(c.rows_dtype, [&](auto src_tag) {
    with_cache_type(c.cache_dtype, [&](auto dst_tag) {
      using Src = decltype(src_tag);
      using Dst = decltype(dst_tag);
      KvWriteParams<Src, Dst> p{};
      p.rows = rows.device_ptr<const Src>();
      p.row_token = row_strides[0];
      p.row_head = c.heads ? row_strides[1] : 0;
      p.cache = reinterpret_cast<Dst*>(cache.data());
      p.cache_block = cache_strides[0];
      p.cache_slot = cache_strides[1];
      p.cache_head = c.heads ? cache_strides[2] : 0;
      if (quantized) {
        p.scale = reinterpret_cast<float*>(scale.data());
        p.scale_block = scale_strides[0];
        p.scale_slot = scale_strides[1];
        p.scale_head = c.heads ? scale_strides[2] : 0;
      }
      p.slot_mapping = reinterpret_cast<const int64_t*>(slot_mapping.data());
      p.tokens = c.T;
      p.heads = c.heads ? c.H : 1;
      p.dim = c.D;
      p.block_size = c.block_size;
      p.num_slots = num_slots;
      const unsigned grid = std::min(grid_for(p.tokens * p.heads, kWarps), 3u);
      cuda_emulation::launch(dim3(grid), kThreads, 0, [&](unsigned char*) { write_rows(p); });
    });
  });

  const TensorView want_cache_view = view_over(want_cache, c.cache_dtype, cache_shape, cache_strides);
  const TensorView want_scale_view = quantized ? view_over(want_scale, DType::f32, scale_shape, scale_strides) : TensorView{};
  write_paged_rows(rows.view, slots.data(), want_cache_view, "rows", "cache", want_scale_view, "scale");

  for (size_t b = 0; b < cache_bytes; ++b)
    ASSERT_EQ(int(cache.data()[b]), int(want_cache[b])) << "cache byte " << b << " (element " << b / dtype_size(c.cache_dtype) << ")";
  for (size_t b = 0; b < scale_bytes; ++b)
    ASSERT_EQ(int(scale.data()[b]), int(want_scale[b])) << "scale byte " << b << " (scale " << b / 4 << ")";
}

TEST(EmulatedKvWrite, MatchesTheCpuScatterBitForBit) {
  for (DType cache : {DType::f32, DType::bf16, DType::f16, DType::i8, DType::f8_e4m3})
    for (DType rows : {DType::f32, DType::bf16, DType::f16}) {
      check_kv_write({37, 3, 40, 7, 16, rows, cache});                         // Llama-like, small
      check_kv_write({19, 2, 96, 4, 16, rows, cache});                         // Phi-3's head_dim: three rounds of 32 lanes
      check_kv_write({21, 2, 129, 5, 5, rows, cache, true, 3, 2});             // odd dims, padded strides
      check_kv_write({9, 1, 576, 4, 3, rows, cache, false, 1, 1});             // MLA latent rows [T, r + dr]
    }
}

TEST(EmulatedKvWrite, QuantizesSpecialRowsAsTheCpu) {
  for (DType cache : {DType::i8, DType::f8_e4m3})
    for (DType rows : {DType::f32, DType::bf16, DType::f16}) {
      check_kv_write({28, 4, 64, 6, 8, rows, cache, true, 0, 0, Rows::special});
      check_kv_write({15, 3, 33, 4, 7, rows, cache, true, 5, 1, Rows::special});
    }
}

// An unchecked write (a model step's) never writes outside the cache: slots past it are skipped.
TEST(EmulatedKvWrite, SkipsSlotsPastTheCache) {
  check_kv_write({40, 2, 48, 5, 16, DType::bf16, DType::bf16, true, 0, 0, Rows::random, true});
  check_kv_write({40, 2, 48, 5, 16, DType::f32, DType::i8, true, 1, 1, Rows::random, true});
  check_kv_write({12, 1, 64, 4, 4, DType::f16, DType::f8_e4m3, false, 0, 0, Rows::random, true});
}

// The checked path's scan: the lowest offending token, or none.
TEST(EmulatedKvWrite, FindsTheFirstBadSlot) {
  const int64_t T = 1000, num_slots = 64;
  for (int64_t bad : {int64_t(-1), int64_t(0), int64_t(517), T - 1}) {
    std::vector<int64_t> slots(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) slots[size_t(t)] = t % 9 == 0 ? -1 : t % num_slots;
    if (bad >= 0) slots[size_t(bad)] = num_slots + bad;
    if (bad >= 0 && bad + 100 < T) slots[size_t(bad + 100)] = num_slots;  // a later one must not win
    DeviceMemory slot_mapping(size_t(T) * 8), flag(8);
    std::memcpy(slot_mapping.data(), slots.data(), size_t(T) * 8);
    std::memset(flag.data(), 0xff, 8);
    auto* first = reinterpret_cast<unsigned long long*>(flag.data());
    cuda_emulation::launch(dim3(2), kThreads, 0, [&](unsigned char*) {
      find_bad_slot(reinterpret_cast<const int64_t*>(slot_mapping.data()), T, num_slots, first);
    });
    EXPECT_EQ(*first, bad < 0 ? ~0ull : (unsigned long long)bad) << "bad token " << bad;
  }
}

}  // namespace
}  // namespace attnzoo
