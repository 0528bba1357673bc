#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "core/error.h"
#include "engine/sampler_kernels.h"

namespace attnzoo {

void SamplingParams::validate() const {
  require(std::isfinite(temperature) && temperature >= 0.f, "temperature",
          "must be a finite number >= 0 (0 = greedy), got " + std::to_string(temperature));
  require(top_k >= 0, "top_k", "must be >= 0 (0 = off), got " + std::to_string(top_k));
  require(top_p > 0.f && top_p <= 1.f, "top_p", "must be in (0, 1] (1 = off), got " + std::to_string(top_p));
  require(min_p >= 0.f && min_p <= 1.f, "min_p", "must be in [0, 1] (0 = off), got " + std::to_string(min_p));
  require(std::isfinite(repetition_penalty) && repetition_penalty > 0.f, "repetition_penalty",
          "must be a finite number > 0 (1 = off), got " + std::to_string(repetition_penalty));
  require(std::isfinite(presence_penalty), "presence_penalty", "must be finite");
  require(std::isfinite(frequency_penalty), "frequency_penalty", "must be finite");
}

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// splitmix64's output function: a bijection whose outputs over a counter pass BigCrush.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Candidates ordered by logit, largest first; equal logits by id, so the order (and every draw that depends on
// it) is a total order that no library's sort can change.
struct ByLogitDescending {
  const float* x;
  bool operator()(int32_t a, int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
};

}  // namespace

double keyed_uniform(uint64_t seed, uint64_t index, DrawPurpose purpose) {
  // Each (seed, purpose) is a splitmix64 sequence of its own, read at `index`: its start is mixed so that seeds
  // a step apart (the n samples of a request use seed + i) start unrelated sequences. The step stays the golden
  // gamma splitmix64 is tested with (interleaving the purposes as a stride of 4 gammas failed a chi-square test).
  const uint64_t start = mix64(seed * 4 + uint64_t(purpose) + kGolden);
  return double(mix64(start + (index + 1) * kGolden) >> 11) * 0x1.0p-53;
}

namespace {

// Calls visit(id, count) once per distinct id of `ids`, in ascending order.
template <class Visit>
void for_each_count(std::span<const int32_t> ids, std::vector<int32_t>& sorted, Visit visit) {
  sorted.assign(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    visit(sorted[i], j - i);
    i = j;
  }
}

}  // namespace

void apply_penalties(float* logits, int64_t vocab, std::span<const int32_t> context, int64_t prompt_length,
                     const SamplingParams& p) {
  require(prompt_length >= 0, "prompt_length", "must be >= 0, got " + std::to_string(prompt_length));
  // Checked even when no penalty is on: an id outside the vocabulary is a caller's bug worth reporting.
  for (int32_t id : context)
    require(id >= 0 && id < vocab, "context_ids",
            "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  const bool repetition = p.repetition_penalty != 1.f;
  const bool additive = p.presence_penalty != 0.f || p.frequency_penalty != 0.f;
  if (context.empty() || (!repetition && !additive)) return;
  // Every token's own logit is changed, repetition first: two passes give what one pass per token would.
  std::vector<int32_t> sorted;
  if (repetition)
    for_each_count(context, sorted, [&](int32_t id, size_t) {
      float& l = logits[id];
      l = l > 0.f ? l / p.repetition_penalty : l * p.repetition_penalty;
    });
  const auto generated = context.subspan(std::min(size_t(prompt_length), context.size()));
  if (additive)
    for_each_count(generated, sorted, [&](int32_t id, size_t count) {
      logits[id] -= p.presence_penalty + p.frequency_penalty * float(count);
    });
}

uint64_t fresh_seed() {
  std::random_device device;
  return (uint64_t(device()) << 32) ^ uint64_t(device());
}

Sampler::Sampler(const SamplingParams& params, int64_t prompt_length) : params_(params), prompt_length_(prompt_length) {
  params_.validate();
  require(prompt_length >= 0, "prompt_length", "must be >= 0, got " + std::to_string(prompt_length));
}

void Sampler::seek(int64_t position) {
  require(position >= 0, "position", "must be >= 0, got " + std::to_string(position));
  position_ = position;
}

double Sampler::take_token_draw() { return keyed_uniform(params_.seed, uint64_t(position_++), DrawPurpose::token); }

int32_t Sampler::prepare_row(std::span<const float> logits, std::span<const int32_t> context, float& max) {
  const int64_t vocab = int64_t(logits.size());
  require(vocab > 0, "logits", "is empty");
  require(vocab <= INT32_MAX, "logits", "has more entries than token ids can name");
  work_.resize(size_t(vocab));
  float* x = work_.data();
  std::memcpy(x, logits.data(), size_t(vocab) * sizeof(float));
  apply_penalties(x, vocab, context, prompt_length_, params_);

  MaxResult mr = logits_max(x, size_t(vocab));
  require(!mr.has_nan, "logits", "contain NaN");
  require(mr.max != INFINITY, "logits", "contain +inf");
  require(mr.max != -INFINITY, "logits", "are all -inf: no token can be sampled");
  if (params_.greedy()) return int32_t(find_first_equal(x, size_t(vocab), mr.max));

  if (params_.temperature != 1.f) {
    const float inv = 1.f / params_.temperature;
    scale_in_place(x, size_t(vocab), inv);
    mr.max *= inv;  // exact: rounding is monotone, so the scaled row's max is the scaled max
    require(std::isfinite(mr.max), "temperature", "is so small that the scaled logits overflow");
  }
  max = mr.max;
  return -1;
}

std::optional<size_t> Sampler::filter(int64_t vocab, float max) {
  const bool top_k = params_.top_k > 0 && params_.top_k < vocab;
  if (top_k || params_.top_p < 1.f) return filter_sorted(vocab, max);
  if (params_.min_p > 0.f) {
    candidates_.resize(size_t(vocab));
    return indices_at_least(work_.data(), size_t(vocab), max + std::log(params_.min_p), candidates_.data());
  }
  return std::nullopt;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> context) {
  float max = 0.f;
  const int32_t greedy = prepare_row(logits, context, max);
  const double u = take_token_draw();  // greedy moves on too: a sample's i-th token is always draw i
  if (greedy >= 0) return greedy;
  const int64_t vocab = int64_t(logits.size());
  if (const auto n = filter(vocab, max)) return draw_from_candidates(*n, max, u);
  return sample_full(vocab, max, u);
}

void Sampler::probabilities(std::span<const float> logits, std::span<const int32_t> context, std::vector<float>& probs) {
  float max = 0.f;
  const int32_t greedy = prepare_row(logits, context, max);
  probs.assign(logits.size(), 0.f);
  if (greedy >= 0) {
    probs[size_t(greedy)] = 1.f;
    return;
  }
  const float* x = work_.data();
  const int64_t vocab = int64_t(logits.size());
  double total = 0.0;
  if (const auto n = filter(vocab, max)) {
    const int32_t* cand = candidates_.data();
    for (size_t i = 0; i < *n; ++i) total += std::exp(double(x[cand[i]]) - double(max));
    for (size_t i = 0; i < *n; ++i) probs[size_t(cand[i])] = float(std::exp(double(x[cand[i]]) - double(max)) / total);
    return;
  }
  for (int64_t i = 0; i < vocab; ++i) total += std::exp(double(x[i]) - double(max));
  for (int64_t i = 0; i < vocab; ++i) probs[size_t(i)] = float(std::exp(double(x[i]) - double(max)) / total);
}

// No filter: one vectorised exp pass with block sums; the draw walks the blocks, then one block.
int32_t Sampler::sample_full(int64_t vocab, float max, double uniform) {
  const size_t n = size_t(vocab);
  exp_.resize(n);
  block_sums_.resize(exp_block_count(n));
  exp_shifted(work_.data(), exp_.data(), n, max, block_sums_.data());
  double total = 0.0;
  for (double s : block_sums_) total += s;
  double u = uniform * total;
  size_t b = 0;
  while (b + 1 < block_sums_.size() && u >= block_sums_[b]) u -= block_sums_[b++];
  const size_t begin = b * kExpBlock, end = std::min(n, begin + kExpBlock);
  const float* e = exp_.data();
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t i = begin; i < end; ++i) {
    if (e[i] <= 0.f) continue;
    cum += double(e[i]);
    last_positive = int32_t(i);
    if (u < cum) return int32_t(i);
  }
  // Rounding left u a hair past this block's sum: the last token with weight in the block is the right answer.
  if (last_positive >= 0) return last_positive;
  return int32_t(find_first_equal(work_.data(), n, max));
}

// top-k and / or top-p (then min-p): the kept tokens in candidates_, how many returned. The nucleus and the k best always lie among the largest logits, so the search starts
// with the tokens within a margin of the max and widens only when that set provably cannot contain the answer.
size_t Sampler::filter_sorted(int64_t vocab, float max) {
  const float* x = work_.data();
  const bool top_k = params_.top_k > 0 && params_.top_k < vocab;
  const size_t k = top_k ? size_t(params_.top_k) : 0;
  const bool top_p = params_.top_p < 1.f;
  candidates_.resize(size_t(vocab));
  int32_t* cand = candidates_.data();
  double full_mass = -1.0;  // sum of exp(x - max) over the whole row, computed only when top-p needs it

  for (const float margin : {4.f, 8.f, 12.f, 16.f, 24.f, 32.f, INFINITY}) {
    const bool last = margin == INFINITY;
    size_t n = indices_at_least(x, size_t(vocab), last ? -INFINITY : max - margin, cand);
    if (top_k && n < k && !last) continue;
    if (top_k && n > k) {
      // The k-th largest value fixes the threshold; HF keeps every token tied with it. Selecting on a packed
      // copy of the values avoids chasing indices into the row (several times faster at 10^4 candidates).
      values_.resize(n);
      for (size_t i = 0; i < n; ++i) values_[i] = x[cand[i]];
      std::nth_element(values_.begin(), values_.begin() + std::ptrdiff_t(k - 1), values_.begin() + std::ptrdiff_t(n),
                       std::greater<float>());
      const float kth = values_[k - 1];
      n = size_t(std::partition(cand, cand + n, [&](int32_t i) { return x[i] >= kth; }) - cand);
    }
    if (top_p) {
      double mass = 0.0;
      for (size_t i = 0; i < n; ++i) mass += std::exp(double(x[cand[i]]) - double(max));
      // After top-k the normaliser is the top-k set's own mass; without top-k it is the whole row's (which the
      // last pass holds entirely).
      double normaliser = mass;
      if (!top_k && !last) {
        if (full_mass < 0) {
          exp_.resize(size_t(vocab));
          block_sums_.resize(exp_block_count(size_t(vocab)));
          exp_shifted(x, exp_.data(), size_t(vocab), max, block_sums_.data());
          full_mass = 0.0;
          for (double s : block_sums_) full_mass += s;
        }
        normaliser = full_mass;
      }
      const double target = double(params_.top_p) * normaliser;
      // The nucleus is a prefix of the sorted row; if these candidates cannot reach its mass, widen.
      if (mass < target * (1.0 - 1e-6) && !last) continue;
      std::sort(cand, cand + n, ByLogitDescending{x});
      double before = 0.0;
      size_t keep = 0;
      while (keep < n && (keep == 0 || before < target)) before += std::exp(double(x[cand[keep++]]) - double(max));
      n = keep;
    } else {
      std::sort(cand, cand + n, ByLogitDescending{x});  // nth_element left them in a library-specific order
    }
    if (params_.min_p > 0.f) {
      // The row's max survives every filter, so min-p's bound is a fixed logit: a prefix of the sorted set.
      const float floor = max + std::log(params_.min_p);
      size_t keep = 0;
      while (keep < n && x[cand[keep]] >= floor) ++keep;
      n = keep;
    }
    return n;
  }
  return 0;  // unreachable: the last pass always returns
}

int32_t Sampler::draw_from_candidates(size_t count, float max, double uniform) {
  const float* x = work_.data();
  const int32_t* cand = candidates_.data();
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) total += std::exp(double(x[cand[i]]) - double(max));
  const double u = uniform * total;
  double cum = 0.0;
  int32_t last_positive = cand[0];
  for (size_t i = 0; i < count; ++i) {
    const double w = std::exp(double(x[cand[i]]) - double(max));
    if (w <= 0.0) continue;
    cum += w;
    last_positive = cand[i];
    if (u < cum) return cand[i];
  }
  return last_positive;
}

}  // namespace attnzoo
