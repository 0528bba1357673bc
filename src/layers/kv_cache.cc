#include "layers/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace attnzoo {

int64_t CacheSpec::bytes_for(int64_t tokens) const {
  int64_t kept = max_tokens > 0 ? std::min(tokens, max_tokens) : tokens;
  if (block_tokens > 0) kept = (kept + block_tokens - 1) / block_tokens * block_tokens;
  return fixed_bytes + kept * bytes_per_token;
}

KvCache::KvCache(int64_t kv_heads, int64_t head_dim, int64_t block_tokens, int64_t window)
    : kv_heads_(kv_heads), head_dim_(head_dim), token_elems_(kv_heads * head_dim), block_tokens_(block_tokens),
      window_(window) {
  require(kv_heads > 0 && head_dim > 0, "kv_cache", "kv_heads and head_dim must be positive");
  require(block_tokens > 0, "block_tokens", "must be positive");
  require(window >= 0, "window", "must be non-negative");
}

CacheSpec KvCache::spec(int64_t kv_heads, int64_t head_dim, int64_t block_tokens, int64_t window) {
  // Between forward calls a windowed cache holds at most window + block_tokens tokens (a chunk being processed
  // adds its own tokens on top, transiently).
  return {window > 0 ? "kv_window" : "kv", 2 * kv_heads * head_dim * int64_t(sizeof(float)), 0, block_tokens,
          window > 0 ? window + block_tokens : 0};
}

void KvCache::drop_outside_window() {
  if (window_ <= 0 || stored_ <= window_ + block_tokens_) return;
  const int64_t drop = stored_ - window_;
  std::memmove(k_.data(), k_.data() + drop * token_elems_, size_t(window_ * token_elems_) * sizeof(float));
  std::memmove(v_.data(), v_.data() + drop * token_elems_, size_t(window_ * token_elems_) * sizeof(float));
  dropped_ += drop;
  stored_ = window_;
}

void KvCache::reserve(int64_t tokens) {
  if (tokens <= capacity_) return;
  int64_t cap = std::max(tokens, 2 * capacity_);
  cap = (cap + block_tokens_ - 1) / block_tokens_ * block_tokens_;
  AlignedBuffer<float> k(size_t(cap * token_elems_)), v(size_t(cap * token_elems_));
  if (stored_ > 0) {
    std::memcpy(k.data(), k_.data(), size_t(stored_ * token_elems_) * sizeof(float));
    std::memcpy(v.data(), v_.data(), size_t(stored_ * token_elems_) * sizeof(float));
  }
  k_ = std::move(k);
  v_ = std::move(v);
  capacity_ = cap;
}

void KvCache::append(const float* k, const float* v, int64_t T, int64_t src_token_stride) {
  // Dropping before appending keeps the `window` tokens the new chunk's first query may still see.
  drop_outside_window();
  reserve(stored_ + T);
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(k_.data() + (stored_ + t) * token_elems_, k + t * src_token_stride, size_t(token_elems_) * sizeof(float));
    std::memcpy(v_.data() + (stored_ + t) * token_elems_, v + t * src_token_stride, size_t(token_elems_) * sizeof(float));
  }
  stored_ += T;
  stored32_ = int32_t(stored_);
}

void KvCache::truncate(int64_t length) {
  require(length >= dropped_ && length <= this->length(), "length",
          "must be in [" + std::to_string(dropped_) + ", " + std::to_string(this->length()) + "], got " +
              std::to_string(length));
  stored_ = length - dropped_;
  stored32_ = int32_t(stored_);
}

TensorView KvCache::keys() const {
  return TensorView::contiguous(k_.data(), DType::f32, {1, stored_, kv_heads_, head_dim_});
}

TensorView KvCache::values() const {
  return TensorView::contiguous(v_.data(), DType::f32, {1, stored_, kv_heads_, head_dim_});
}

KvCacheView KvCache::decode_view() const {
  KvCacheView view;
  view.k = TensorView::contiguous(k_.data(), DType::f32, {1, capacity_, kv_heads_, head_dim_});
  view.v = TensorView::contiguous(v_.data(), DType::f32, {1, capacity_, kv_heads_, head_dim_});
  view.cache_seqlens = &stored32_;
  return view;
}

}  // namespace attnzoo
