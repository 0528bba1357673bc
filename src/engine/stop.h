#pragma once
// When generation ends: end-of-sequence ids from the checkpoint, and stop strings found in the streamed text.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo {

namespace tok {
class Tokenizer;
}

// The checkpoint's end-of-sequence ids: generation_config.json "eos_token_id" (an int or a list) when present,
// else config.json's (or its text_config's); for a GGUF (the file, or a directory holding one and neither json
// file) its tokenizer.ggml.eos_token_id and eot_token_id. Empty when none names one. Throws LoadError for unreadable or
// malformed files, naming the file and key.
std::vector<int32_t> load_eos_token_ids(const std::string& model_dir);

// The one rule for the ids that end generation when the caller names none (attnzoo generate / chat, the Python
// Model.generate / Model.chat / Engine, attnzoo serve): every id any source calls an end, as vLLM stops at the
// tokenizer's EOS and generation_config's ids alike: load_eos_token_ids(model_path), the tokenizer's
// eos_token_ids (tokenizer_config.json's eos_token, a GGUF's eos / eot; may be null) and, for a chat, the
// template's end-of-turn token (ChatFormat::end_of_turn). Sorted, without repeats.
std::vector<int32_t> default_eos_ids(const std::string& model_path, const tok::Tokenizer* tokenizer,
                                     std::span<const int32_t> end_of_turn = {});

// The length of the longest end of `text` that is a proper start of `marker`: what a reader of streamed text holds
// back so that a marker cut across two pieces is still seen (StopStringMatcher here; the server's reasoning,
// harmony and tool-call readers).
size_t tag_overlap(std::string_view text, std::string_view marker);

// Sets the logits of `ids` (those inside the row) to -inf: how a minimum length (vLLM's min_tokens, transformers'
// min_new_tokens) keeps the ids that would end generation from being drawn, greedy then taking the best other token.
void suppress_tokens(std::span<float> logits, std::span<const int32_t> ids);

// Finds stop strings in text that arrives piece by piece. Text that might be the start of a stop string is held
// back until the next piece settles it, so the caller never streams a partial stop string it must then retract.
class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);  // empty strings are rejected (ArgumentError "stop")

  struct Step {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed: `text` ends just before it; feed nothing more
  };
  // can_end false: no stop string may end inside `piece` (the text of the tokens a minimum length asks for, as
  // vLLM's detokenizer skips it), though one may begin there and end in a later piece.
  Step push(std::string_view piece, bool can_end = true);
  // The held-back tail, once no more text will come.
  std::string flush();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  size_t cannot_end_ = 0;  // the first bytes of pending_, in which no match may end
  bool stopped_ = false;
};

}  // namespace attnzoo
