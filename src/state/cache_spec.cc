#include "state/cache_spec.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <span>

#include "core/error.h"

namespace attnzoo {

const char* cache_kind_name(CacheKind k) {
  switch (k) {
    case CacheKind::kv: return "kv";
    case CacheKind::kv_window: return "kv_window";
    case CacheKind::latent: return "latent";
    case CacheKind::state: return "state";
    case CacheKind::kv_state: return "kv_state";
  }
  return "?";
}

CacheSpec CacheSpec::kv(int64_t kv_heads, int64_t head_dim, int64_t window) {
  require(kv_heads > 0 && head_dim > 0, "kv_cache", "kv_heads and head_dim must be positive");
  require(window >= 0, "window", "must be non-negative, got " + std::to_string(window));
  CacheSpec s;
  s.kind = window > 0 ? CacheKind::kv_window : CacheKind::kv;
  s.paged_tensors = 2;
  s.heads = kv_heads;
  s.head_dim = head_dim;
  s.window = window;
  s.token_elems();  // overflow check up front
  return s;
}

CacheSpec CacheSpec::latent(int64_t latent_dim) {
  require(latent_dim > 0, "latent_dim", "must be positive");
  CacheSpec s;
  s.kind = CacheKind::latent;
  s.paged_tensors = 1;
  s.heads = 1;
  s.head_dim = latent_dim;
  return s;
}

CacheSpec CacheSpec::state(int64_t floats) {
  require(floats > 0, "state", "must hold at least one value");
  CacheSpec s;
  s.kind = CacheKind::state;
  s.state_floats = floats;
  s.fixed_bytes();
  return s;
}

CacheSpec CacheSpec::combine(const CacheSpec& a, const CacheSpec& b) {
  require(!(a.paged() && b.paged()), "cache_spec", "a layer can hold at most one paged cache");
  CacheSpec s = a.paged() ? a : b;
  s.state_floats = checked_add(a.state_floats, b.state_floats, "state");
  if (s.paged() && s.state_floats > 0) s.kind = CacheKind::kv_state;
  return s;
}

int64_t CacheSpec::token_elems() const { return checked_mul(heads, head_dim, "cache per token"); }

int64_t CacheSpec::token_scales() const { return is_quantized_kv(dtype) ? heads : 0; }

int64_t CacheSpec::bytes_per_token() const {
  const int64_t row = checked_add(checked_mul(token_elems(), int64_t(dtype_size(dtype)), "cache per token"),
                                  token_scales() * int64_t(sizeof(float)), "cache per token");
  return checked_mul(paged_tensors, row, "cache bytes per token");
}

int64_t CacheSpec::fixed_bytes() const { return checked_mul(state_floats, int64_t(sizeof(float)), "state bytes"); }

int64_t CacheSpec::bytes_for(int64_t tokens, int64_t block_tokens) const {
  require(tokens >= 0, "tokens", "must be non-negative");
  require(block_tokens > 0, "block_tokens", "must be positive");
  int64_t blocks = tokens / block_tokens + (tokens % block_tokens != 0);
  return checked_add(fixed_bytes(),
                     checked_mul(checked_mul(blocks, block_tokens, "cache tokens"), bytes_per_token(), "cache bytes"),
                     "cache bytes");
}

std::string CacheSpec::describe() const {
  std::string s = cache_kind_name(kind);
  if (paged())
    s += std::string(" ") + dtype_name(dtype) + " [" + std::to_string(paged_tensors) + " x " + std::to_string(heads) +
         " x " + std::to_string(head_dim) + "]/token" + (token_scales() > 0 ? " + f32 scale per head" : "");
  if (window > 0) s += " window " + std::to_string(window);
  if (state_floats > 0) s += " + state " + std::to_string(fixed_bytes()) + " B";
  return s;
}

int64_t window_of_all_paged(const std::vector<CacheSpec>& layers) {
  int64_t window = 0;
  for (const CacheSpec& l : layers) {
    if (!l.paged()) continue;
    if (l.window <= 0) return 0;
    window = std::max(window, l.window);
  }
  return window;
}

int64_t tokens_held(int64_t tokens, int64_t block_tokens, int64_t window) {
  if (window <= 0 || block_tokens <= 0) return tokens;
  return std::min(tokens, ((window + block_tokens - 1) / block_tokens + 1) * block_tokens);
}

BlockLayout block_layout(const std::vector<CacheSpec>& layers, bool free_outside_window) {
  BlockLayout out;
  out.group_of.assign(layers.size(), -1);
  out.slot_of.assign(layers.size(), -1);
  std::map<int64_t, std::vector<int64_t>> by_window;  // ascending: full attention (0) first
  std::vector<int64_t> paged;
  bool alike = true;
  for (size_t l = 0; l < layers.size(); ++l) {
    const CacheSpec& s = layers[l];
    if (!s.paged()) continue;
    if (!paged.empty()) {
      const CacheSpec& f = layers[size_t(paged[0])];
      alike = alike && s.paged_tensors == f.paged_tensors && s.heads == f.heads && s.head_dim == f.head_dim;
    }
    paged.push_back(int64_t(l));
    by_window[free_outside_window ? s.window : 0].push_back(int64_t(l));
  }
  auto add = [&](int64_t window, std::span<const int64_t> group) {
    for (size_t j = 0; j < group.size(); ++j) {
      out.group_of[size_t(group[j])] = int32_t(out.groups.size());
      out.slot_of[size_t(group[j])] = int32_t(j);
    }
    out.groups.push_back({window, std::vector<int64_t>(group.begin(), group.end())});
    out.slots = std::max(out.slots, int64_t(group.size()));
  };
  if (paged.empty()) return out;
  if (by_window.size() == 1 || !alike) {
    add(free_outside_window ? window_of_all_paged(layers) : 0, paged);
    return out;
  }
  // As wide as the rarest window's layers, and a divisor of the full-attention layers' count: only the windowed
  // groups (which hold a window, not the context) may leave slots unused.
  int64_t width = int64_t(paged.size());
  for (const auto& [window, ls] : by_window) width = std::min(width, int64_t(ls.size()));
  if (by_window.begin()->first == 0) width = std::gcd(width, int64_t(by_window.begin()->second.size()));
  for (const auto& [window, ls] : by_window)
    for (size_t i = 0; i < ls.size(); i += size_t(width))
      add(window, std::span(ls).subspan(i, std::min(ls.size() - i, size_t(width))));
  return out;
}

std::vector<int64_t> bytes_held(const std::vector<CacheSpec>& layers, int64_t tokens, int64_t block_tokens) {
  const BlockLayout layout = block_layout(layers);
  std::vector<int64_t> out;
  for (size_t l = 0; l < layers.size(); ++l)
    out.push_back(layers[l].bytes_for(tokens_held(tokens, block_tokens, layout.held_window(l)), block_tokens));
  return out;
}

}  // namespace attnzoo
