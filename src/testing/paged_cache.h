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
#include "kernels/softmax/mla.h"
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

// A latent (MLA) cache holding `lens[b]` random rows of `width` values for each sequence b, paged over shuffled
// blocks of `block_size` tokens (0: contiguous [B, S]). Rows no sequence owns are NaN bytes and table entries past
// a sequence's last block are -1, so a kernel that reads past a sequence's end, or follows padding, fails.
struct LatentTestCache {
  HostTensor latent;
  std::vector<int32_t> table;  // empty when contiguous
  int64_t max_blocks = 0;

  LatentCacheView view(const std::vector<int32_t>& lens) const {
    return {latent.view, lens.data(), table.empty() ? nullptr : table.data(), table.empty() ? 0 : max_blocks};
  }
};

inline LatentTestCache latent_test_cache(DType dtype, const std::vector<int32_t>& lens, int64_t width,
                                         int64_t block_size, uint64_t seed) {
  const int64_t B = int64_t(lens.size()), S = *std::max_element(lens.begin(), lens.end()) + 3;
  const int64_t bs = block_size ? block_size : S, max_blocks = (S + bs - 1) / bs;
  const int64_t num_blocks = block_size ? B * max_blocks + 2 : B;
  const HostTensor rows(dtype, {B, S, width}, seed + 1);
  LatentTestCache c{HostTensor(dtype, {num_blocks, bs, width}, 0, 0.f), {}, max_blocks};
  fill_nan_bytes(c.latent);
  if (block_size) c.table = shuffled_block_table(B, max_blocks, num_blocks, seed);
  const size_t row_bytes = size_t(width) * dtype_size(dtype);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t pos = 0; pos < lens[size_t(b)]; ++pos) {
      const int64_t dst = block_size ? c.table[size_t(b * max_blocks + pos / bs)] * bs + pos % bs : b * S + pos;
      std::memcpy(c.latent.bytes.data() + size_t(dst) * row_bytes, rows.bytes.data() + size_t(b * S + pos) * row_bytes,
                  row_bytes);
    }
  for (int64_t b = 0; b < B && block_size; ++b)
    for (int64_t i = (lens[size_t(b)] + bs - 1) / bs; i < max_blocks; ++i) c.table[size_t(b * max_blocks + i)] = -1;
  return c;
}

}  // namespace attnzoo::testing
