#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/error.h"
#include "core/threads.h"
#include "engine/logprobs.h"

namespace attnzoo {
namespace {

void check_tokens(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& o) {
  const int64_t V = model.info().vocab_size;
  require(!o.bos || (*o.bos >= 0 && *o.bos < V), "bos",
          "id " + std::to_string(o.bos.value_or(0)) + " outside the vocabulary [0, " + std::to_string(V) + ")");
  const int64_t n = int64_t(tokens.size());
  if (n < 2 * o.n_ctx)
    throw ArgumentError(o.source + ": tokenizes to " + std::to_string(n) + " tokens; perplexity with a window (-c) of " +
                        std::to_string(o.n_ctx) + " needs at least 2 * " + std::to_string(o.n_ctx) + " = " +
                        std::to_string(2 * o.n_ctx) + " tokens (a longer text, or a smaller -c)");
  for (size_t i = 0; i < tokens.size(); ++i)
    require(tokens[i] >= 0 && tokens[i] < V, "tokens",
            o.source + ": token " + std::to_string(i) + " is id " + std::to_string(tokens[i]) +
                ", outside the model's vocabulary [0, " + std::to_string(V) + ")");
}

// Sums of -log p and its square over one window's scored tokens.
struct WindowSums {
  double nll = 0, nll2 = 0;
};

}  // namespace

void check_perplexity_options(const PerplexityOptions& o, int64_t max_context) {
  // n_ctx / 2 tokens of context, then at least two scored tokens so the error estimate exists.
  require(o.n_ctx >= 4, "n_ctx", "the window (-c) must be at least 4 tokens, got " + std::to_string(o.n_ctx));
  require(max_context <= 0 || o.n_ctx <= max_context, "n_ctx",
          "the window (-c) of " + std::to_string(o.n_ctx) + " tokens is longer than the model's context of " +
              std::to_string(max_context) + " (" + kContextOrigin + ")");
  require(o.n_batch >= 1, "n_batch", "tokens per forward call (-b) must be positive, got " + std::to_string(o.n_batch));
  require(o.n_chunks == -1 || o.n_chunks >= 1, "n_chunks",
          "windows to score (--chunks) must be positive (or -1: every window), got " + std::to_string(o.n_chunks));
}

int64_t perplexity_windows_per_call(const Model& model, const PerplexityOptions& o) {
  // llama.cpp's n_seq, bounded by the recurrent-state slots a hybrid's windows each need.
  int64_t per_call = std::max<int64_t>(1, o.n_batch / std::max<int64_t>(1, o.n_ctx));
  if (model.cache().has_state()) per_call = std::min(per_call, std::max<int64_t>(1, model.cache().stats().state_slots));
  return per_call;
}

std::optional<int32_t> added_bos(const tok::Tokenizer& tokenizer) {
  // The post-processor's prefix shows on any text: the same probe with and without special tokens.
  const std::string probe = "The quick brown fox";
  const std::vector<int32_t> with = tokenizer.encode(probe, true), plain = tokenizer.encode(probe, false);
  if (with.size() > plain.size() && std::equal(plain.begin(), plain.end(), with.begin() + 1)) return with.front();
  return std::nullopt;
}

PerplexityTokens perplexity_tokens(const tok::Tokenizer& tokenizer, std::string_view text) {
  return {tokenizer.encode(text, true), added_bos(tokenizer)};
}

void finish_perplexity(PerplexityResult& r, double nll_sum, double nll2_sum, int64_t count) {
  r.n_scored = count;
  const double mean = nll_sum / double(count);
  r.ppl = std::exp(mean);
  const double variance = nll2_sum / double(count) - mean * mean;
  r.ppl_error = variance > 0 && count > 1 ? std::sqrt(variance / double(count - 1)) * r.ppl
                                          : std::numeric_limits<double>::quiet_NaN();
}

PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& o,
                            const std::function<void(const PerplexityResult&)>& on_chunk) {
  check_perplexity_options(o, model.info().max_position_embeddings);
  check_tokens(model, tokens, o);
  const int64_t c = o.n_ctx, V = model.info().vocab_size;
  const int64_t first = c / 2, scored = c - 1 - first;
  const int64_t n_chunks = std::min(o.n_chunks < 0 ? std::numeric_limits<int64_t>::max() : o.n_chunks,
                                    int64_t(tokens.size()) / c);
  // Windows side by side in one call; a window longer than n_batch runs in pieces of n_batch tokens.
  const int64_t per_call = perplexity_windows_per_call(model, o);
  const int64_t piece = std::min(o.n_batch, c);

  PerplexityResult r;
  r.n_tokens = int64_t(tokens.size());
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  for (int64_t w0 = 0; w0 < n_chunks; w0 += per_call) {
    const int64_t nw = std::min(per_call, n_chunks - w0);
    std::vector<std::unique_ptr<Sequence>> seqs;
    for (int64_t w = 0; w < nw; ++w) seqs.push_back(model.new_sequence());
    std::vector<WindowSums> sums(static_cast<size_t>(nw));
    for (int64_t off = 0; off < c; off += piece) {
      const int64_t len = std::min(piece, c - off);
      Batch batch;
      std::vector<int64_t> rows, owner;
      std::vector<int32_t> targets;
      for (int64_t w = 0; w < nw; ++w) {
        const int32_t* window = tokens.data() + (w0 + w) * c;
        std::vector<int32_t> ids(window + off, window + off + len);
        if (off == 0 && o.bos) ids[0] = *o.bos;
        const int64_t base = batch.num_tokens();
        batch.add(*seqs[size_t(w)], ids);
        for (int64_t j = std::max(off, first); j < std::min(off + len, c - 1); ++j) {
          rows.push_back(base + j - off);
          targets.push_back(window[j + 1]);
          owner.push_back(w);
        }
      }
      // An empty index list asks for every row; a piece with nothing to score asks for one and ignores it.
      const bool none = rows.empty();
      if (none) rows.push_back(batch.num_tokens() - 1);
      // Host rows on every device: the scored rows' log-softmax runs on the CPU (a GPU model copies them down).
      const std::vector<float> logits = model.forward(batch, rows);
      if (none) continue;
      std::vector<double> row_nll(targets.size());
      ThreadPool::global().parallel_for(int64_t(targets.size()), [&](int64_t i, int) {
        const std::span<const float> row(logits.data() + size_t(i) * size_t(V), size_t(V));
        row_nll[size_t(i)] = -double(row_logprobs(row, targets[size_t(i)], 0).chosen);
      });
      for (size_t i = 0; i < row_nll.size(); ++i) {
        sums[size_t(owner[i])].nll += row_nll[i];
        sums[size_t(owner[i])].nll2 += row_nll[i] * row_nll[i];
      }
    }
    seqs.clear();  // each window's blocks and state slot go back to the pool before the next ones start
    for (const WindowSums& s : sums) {
      nll += s.nll;
      nll2 += s.nll2;
      count += scored;
      r.chunk_nll.push_back(s.nll / double(scored));
      r.running_ppl.push_back(std::exp(nll / double(count)));
      finish_perplexity(r, nll, nll2, count);
      if (on_chunk) on_chunk(r);
    }
  }
  return r;
}

}  // namespace attnzoo
