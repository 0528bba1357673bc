#pragma once
// Perplexity of a model over a text, as llama.cpp's perplexity tool defines it: the text's tokens are cut into
// non-overlapping windows of n_ctx tokens, each window runs from an empty state (its first token replaced by BOS
// when the tokenizer adds one), and only the second half of each window is scored, so every scored token has at
// least n_ctx / 2 tokens of context. Logits of window position j (j = n_ctx/2 .. n_ctx-2) score token j + 1.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {

struct PerplexityOptions {
  int64_t n_ctx = 512;     // window length (llama.cpp -c)
  int64_t n_batch = 2048;  // tokens per forward call (-b): n_batch / n_ctx windows side by side, or pieces of one
  int64_t n_chunks = -1;   // windows to score (--chunks); -1: every whole window of the text
  std::optional<int32_t> bos;  // replaces each window's first token (the tokenizer's BOS, when it adds one)
  std::string source = "tokens";  // names the text in error messages (the file, "text", "ids")
};

struct PerplexityResult {
  double ppl = 0;
  // llama.cpp's "+/-": ppl times the standard error of the mean negative log-likelihood (NaN when undefined).
  double ppl_error = 0;
  std::vector<double> running_ppl;  // after each window, as llama.cpp prints [1]x,[2]y,...
  std::vector<double> chunk_nll;    // mean negative log-likelihood of each window on its own
  int64_t n_tokens = 0;             // tokens of the whole text
  int64_t n_scored = 0;             // tokens scored
};

// The text's tokens as the tokenizer encodes it with special tokens, and the BOS it puts in front of a text
// (nullopt when it adds none: windows then start with the text's own token, as in llama.cpp).
struct PerplexityTokens {
  std::vector<int32_t> tokens;
  std::optional<int32_t> bos;
};
PerplexityTokens perplexity_tokens(const tok::Tokenizer& tokenizer, std::string_view text);
std::optional<int32_t> added_bos(const tok::Tokenizer& tokenizer);

// ArgumentError naming the option for n_ctx < 4, n_ctx past `max_context` (the model's max_position_embeddings;
// <= 0: unknown, not checked), n_batch or n_chunks < 1 (other than n_chunks = -1). perplexity() calls it; front
// ends call it too so a bad flag fails before the model loads.
void check_perplexity_options(const PerplexityOptions& options, int64_t max_context);

// How many windows perplexity() runs side by side in one forward call (llama.cpp's n_seq).
int64_t perplexity_windows_per_call(const Model& model, const PerplexityOptions& options);

// Runs the windows through `model` (several per forward call, each its own sequence in the pool, freed after its
// window) and scores them. ArgumentError for the options above, a BOS outside the vocabulary, and for fewer than 2 * n_ctx tokens
// (naming options.source). `on_chunk(result)` is called after each window with the running result.
PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options,
                            const std::function<void(const PerplexityResult&)>& on_chunk = {});

// llama.cpp's final estimate from sums over the scored tokens of -log p and (-log p)^2.
void finish_perplexity(PerplexityResult& r, double nll_sum, double nll2_sum, int64_t count);

}  // namespace attnzoo
