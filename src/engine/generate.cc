#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "engine/stop.h"
#include "models/model.h"

namespace attnzoo {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::max_new_tokens: return "max_new_tokens";
    case StopReason::eos: return "eos";
    case StopReason::stop_string: return "stop_string";
    case StopReason::max_positions: return "max_positions";
    case StopReason::cancelled: return "cancelled";
  }
  return "?";
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void LogitsSource::append_all(std::span<const int32_t>, std::span<float>) {
  throw ArgumentError("speculative: this logits source cannot verify several tokens at once");
}

void LogitsSource::rollback(int64_t) {
  throw ArgumentError("speculative: this logits source cannot roll back");
}

GenerationResult generate(LogitsSource& model, std::span<const int32_t> prompt, const GenerationOptions& options,
                          TextStream* text, const TextCallback& on_text) {
  require(!prompt.empty(), "prompt", "is empty: generation needs at least one token to condition on");
  require(options.max_new_tokens >= 0, "max_new_tokens", "must be >= 0, got " + std::to_string(options.max_new_tokens));
  require(options.min_new_tokens >= 0, "min_new_tokens",
          "must be >= 0, got " + std::to_string(options.min_new_tokens));
  require(options.stop.empty() || text != nullptr, "stop", "stop strings need a tokenizer to decode the text");
  Sampler sampler(options.sampling, int64_t(prompt.size()));
  StopStringMatcher matcher(options.stop);
  const int64_t vocab = model.vocab_size();
  for (int32_t id : prompt)
    require(id >= 0 && id < vocab, "prompt", "token id " + std::to_string(id) + " is outside the vocabulary");
  const int64_t max_positions = model.max_positions();
  require(max_positions <= 0 || int64_t(prompt.size()) <= max_positions, "prompt",
          "has " + std::to_string(prompt.size()) + " tokens, more than the model's " + std::to_string(max_positions) +
              " positions (" + kContextOrigin + ")");

  GenerationResult result;
  result.prompt_tokens = int64_t(prompt.size());
  if (options.max_new_tokens == 0) return result;

  auto emit = [&](const std::string& s) {
    if (s.empty()) return;
    result.text += s;
    if (on_text) on_text(s);
  };

  const bool speculate = options.proposer && options.num_speculative_tokens > 0 && model.can_speculate();
  // A verification pass of k + 1 tokens may be rolled back whole.
  if (speculate) model.keep_rollback_room(options.num_speculative_tokens + 1);
  std::vector<float> logits(static_cast<size_t>(vocab));
  auto t0 = std::chrono::steady_clock::now();
  model.append(prompt, logits);
  result.prefill_seconds = seconds_since(t0);

  // Penalties look at everything the model has seen: the prompt (repetition only) and the tokens generated so far.
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  // Row i from `first_row` decides new token index + i (0-based): drawn with fewer than min_new_tokens before it,
  // it may not be an EOS id. A verification pass bans each of its rows as the plain step there would.
  const auto ban_ends = [&](float* first_row, int64_t index, int64_t rows) {
    for (int64_t i = 0; i < rows && index + i < options.min_new_tokens; ++i)
      suppress_tokens(std::span(first_row + i * vocab, size_t(vocab)), options.eos_token_ids);
  };
  bool stopped_by_text = false;
  // Records one new token; true when generation ends with it.
  auto commit = [&](int32_t id) {
    result.tokens.push_back(id);
    context.push_back(id);
    if (std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), id) != options.eos_token_ids.end()) {
      result.reason = StopReason::eos;
      return true;
    }
    if (text) {
      const auto step = matcher.push(text->push(id), int64_t(result.tokens.size()) > options.min_new_tokens);
      emit(step.text);
      if (step.stopped) {
        result.reason = StopReason::stop_string;
        stopped_by_text = true;
        return true;
      }
    }
    if (int64_t(result.tokens.size()) >= options.max_new_tokens) {
      result.reason = StopReason::max_new_tokens;
      return true;
    }
    if (options.cancel && options.cancel()) {
      result.reason = StopReason::cancelled;
      return true;
    }
    return false;
  };
  Proposal proposal;
  std::vector<int32_t> verify_tokens;
  std::vector<float> rows;
  std::optional<int32_t> chosen;  // a token verification already picked, not yet committed
  for (;;) {
    if (max_positions > 0 && int64_t(context.size()) >= max_positions) {
      result.reason = StopReason::max_positions;
      break;
    }
    if (!chosen) ban_ends(logits.data(), int64_t(result.tokens.size()), 1);
    const int32_t id = chosen ? *chosen : sampler.sample(logits, context);
    chosen.reset();
    if (commit(id)) break;
    // `id` is not in the model's memory yet: it goes in with this step's guesses, if any.
    t0 = std::chrono::steady_clock::now();
    proposal.tokens.clear();
    if (speculate) {
      // Guesses past max_new_tokens or the last position would be thrown away: do not ask for them.
      int64_t k = std::min(options.num_speculative_tokens, options.max_new_tokens - int64_t(result.tokens.size()) - 1);
      if (max_positions > 0) k = std::min<int64_t>(k, max_positions - 1 - int64_t(context.size()));
      if (k > 0) options.proposer->propose(context, k, sampler, proposal);
    }
    if (proposal.tokens.empty()) {
      model.append(std::span<const int32_t>(&id, 1), logits);
    } else {
      const int64_t before = int64_t(context.size()) - 1, n = int64_t(proposal.tokens.size());
      verify_tokens.assign(1, id);
      verify_tokens.insert(verify_tokens.end(), proposal.tokens.begin(), proposal.tokens.end());
      rows.resize(size_t((n + 1) * vocab));
      model.checkpoint();
      model.append_all(verify_tokens, rows);
      ban_ends(rows.data(), int64_t(result.tokens.size()), n + 1);
      const std::vector<int32_t> kept = verify_proposal(rows, vocab, context, proposal, sampler);
      const int64_t accepted = int64_t(kept.size()) - 1;
      if (accepted < n) model.rollback(before + 1 + accepted);
      bool done = false;
      int64_t committed = 0;
      while (committed < accepted && !done) done = commit(kept[size_t(committed++)]);
      // Guesses kept after an EOS or a stop in the same run were never output: not accepted.
      result.speculative.add(n, committed);
      if (done) {
        result.decode_seconds += seconds_since(t0);
        ++result.decode_steps;
        break;
      }
      chosen = kept.back();
    }
    result.decode_seconds += seconds_since(t0);
    ++result.decode_steps;
  }
  if (text && !stopped_by_text) {
    const auto step = matcher.push(text->flush(), int64_t(result.tokens.size()) > options.min_new_tokens);
    emit(step.text);
    if (step.stopped) {
      result.reason = StopReason::stop_string;
    } else {
      emit(matcher.flush());
    }
  }
  return result;
}

}  // namespace attnzoo
