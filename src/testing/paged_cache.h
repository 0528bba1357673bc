#pragma once
// Paged copies of contiguous test caches: the same logical rows spread over shuffled physical blocks, with the
// spare blocks left zero, so a kernel that ignores the block table reads the wrong (or zero) rows.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

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

}  // namespace attnzoo::testing
