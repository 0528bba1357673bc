#include "kernels/softmax/block_mask.h"

#include <random>

#include "core/error.h"

namespace attnzoo {

BlockMask::BlockMask(const BlockMaskSpec& spec) : spec_(spec) {
  require(spec.seq_len >= 1, "seq_len", "must be >= 1, got " + std::to_string(spec.seq_len));
  require(spec.block >= 1 && spec.block <= 65536, "block", "must be in [1, 65536], got " + std::to_string(spec.block));
  require(spec.local_blocks >= 0, "local_blocks", "must be >= 0");
  require(spec.global_tokens >= 0, "global_tokens", "must be >= 0");
  require(spec.stride >= 0, "stride", "must be >= 0");
  require(spec.random_blocks >= 0, "random_blocks", "must be >= 0");
  // Written without seq_len + block - 1, which overflows for huge lengths.
  num_blocks_ = spec.seq_len / spec.block + (spec.seq_len % spec.block != 0);
  require(num_blocks_ <= 16384, "seq_len", "seq_len / block must be <= 16384 blocks (the mask is n^2 bytes)");
  require(spec.random_blocks <= num_blocks_, "random_blocks",
          "must be <= the number of blocks (" + std::to_string(num_blocks_) + ")");
  const int64_t n = num_blocks_;
  bits_.assign(size_t(n * n), 0);
  const int64_t global_blocks = spec.global_tokens / spec.block + (spec.global_tokens % spec.block != 0);
  for (int64_t qb = 0; qb < n; ++qb) {
    for (int64_t kb = 0; kb < n; ++kb) {
      const int64_t d = qb > kb ? qb - kb : kb - qb;
      bool on = d < spec.local_blocks;
      on |= kb < global_blocks || qb < global_blocks;
      on |= spec.stride > 0 && kb % spec.stride == spec.stride - 1;
      bits_[size_t(qb * n + kb)] = on;
    }
  }
  // Random blocks come from a seeded generator of fixed definition, so a seed means the same mask everywhere.
  std::mt19937_64 rng(spec.seed);
  for (int64_t qb = 0; qb < n; ++qb) {
    for (int64_t r = 0; r < spec.random_blocks; ++r) {
      int64_t kb = int64_t(rng() % uint64_t(n));
      bits_[size_t(qb * n + kb)] = 1;
    }
  }
}

double BlockMask::density() const {
  int64_t on = 0;
  for (uint8_t b : bits_) on += b;
  return bits_.empty() ? 0.0 : double(on) / double(bits_.size());
}

}  // namespace attnzoo
