#pragma once
// Paged copies of contiguous test caches: the same logical rows spread over shuffled physical blocks, with the
// spare blocks left zero, so a kernel that ignores the block table reads the wrong (or zero) rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "kernels/softmax/kv_quant.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

// Block table [B, max_blocks] over num_blocks >= B * max_blocks physical blocks, in shuffled order.
inline std::vector<int32_t> shuffled_block_table(int64_t B, int64_t max_blocks, int64_t num_blocks, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(uint32_t(seed)));
  ids.resize(size_t(B * max_blocks));
  return ids;
}

// contiguous [B, S, ...] -> [num_blocks, block_size, ...]: row pos of sequence b goes to block
// table[b][pos / block_size], slot pos % block_size.
inline HostTensor to_paged(const HostTensor& contiguous, const std::vector<int32_t>& table, int64_t max_blocks,
                           int64_t block_size, int64_t num_blocks) {
  const TensorView& c = contiguous.view;
  std::vector<int64_t> shape(c.shape.begin(), c.shape.begin() + c.ndim);
  const int64_t B = shape[0], S = shape[1];
  shape[0] = num_blocks;
  shape[1] = block_size;
  HostTensor paged(c.dtype, shape, 0, 0.f);
  const size_t row = size_t(c.strides[1]) * dtype_size(c.dtype);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t pos = 0; pos < std::min(S, max_blocks * block_size); ++pos) {
      const int64_t dst = table[size_t(b * max_blocks + pos / block_size)] * block_size + pos % block_size;
      std::memcpy(paged.bytes.data() + size_t(dst) * row, contiguous.bytes.data() + size_t(b * S + pos) * row, row);
    }
  return paged;
}

// One cache tensor (K or V) of a decode test, contiguous [B, S, Hkv, D] in `dtype`: N(0, 1) rows times a per-row
// factor in [1/4, 4], so the per-row scales of int8 / fp8 caches differ (`scale` is set for those).
struct CacheTensor {
  std::optional<HostTensor> data, scale;
};

inline CacheTensor make_cache_tensor(DType dtype, int64_t B, int64_t S, int64_t Hkv, int64_t D, uint64_t seed) {
  HostTensor f(DType::f32, {B, S, Hkv, D}, seed);
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> exponent(-2.f, 2.f);
  const int64_t rows = B * S * Hkv;
  float* x = f.view.ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float m = std::exp2(exponent(rng));
    for (int64_t d = 0; d < D; ++d) x[r * D + d] *= m;
  }
  CacheTensor t;
  t.data.emplace(dtype, std::vector<int64_t>{B, S, Hkv, D}, 0, 0.f);
  if (is_quantized_kv(dtype)) {
    t.scale.emplace(DType::f32, std::vector<int64_t>{B, S, Hkv}, 0, 0.f);
    for (int64_t r = 0; r < rows; ++r)
      t.scale->view.ptr<float>()[r] = quantize_kv_row(x + r * D, size_t(D), dtype, t.data->bytes.data() + r * D);
  } else {
    for (int64_t i = 0; i < rows * D; ++i) store_from_f32(t.data->view.data, dtype, i, x[i]);
  }
  return t;
}

}  // namespace attnzoo::testing
