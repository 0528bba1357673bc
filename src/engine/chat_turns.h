#pragma once
// Chat-specific pieces of generation: a checkpoint's chat format (template, special-token strings, the tokens
// that end an assistant turn) and the prompt ids of a conversation.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {

// The special token a template writes right after an assistant message's content (<|im_end|>, <|eot_id|>,
// <end_of_turn>, </s>, ...), found by rendering a probe conversation: generation should stop there even when the
// checkpoint's EOS is another token. Empty when the template writes no special token there or cannot render the
// probe.
std::vector<int32_t> end_of_turn_ids(const chat::ChatTemplate& chat_template, const chat::Dict& special_tokens,
                                     const tok::Tokenizer& tokenizer);

class ChatFormat {
 public:
  // The checkpoint's template (see chat::load_chat_template); throws LoadError naming the directory when it has
  // none.
  ChatFormat(const std::string& model_dir, std::shared_ptr<const tok::Tokenizer> tokenizer);

  // The conversation rendered (with the assistant header when add_generation_prompt) and encoded without
  // adding special tokens: the template writes BOS itself, as transformers' apply_chat_template(tokenize=True).
  // `tools`: transformers' tools= (OpenAI's tools list as sent), none when the request has none.
  // `kwargs`: more template variables (transformers' apply_chat_template(**kwargs), vLLM's chat_template_kwargs).
  std::string render(const chat::Value& messages, bool add_generation_prompt,
                     const chat::Value& tools = chat::Value::none(), const chat::Dict& kwargs = {}) const;
  std::vector<int32_t> prompt_ids(const chat::Value& messages, bool add_generation_prompt) const;
  std::vector<int32_t> encode(const std::string& text) const { return tokenizer_->encode(text, false); }
  const std::vector<int32_t>& end_of_turn() const { return end_of_turn_; }
  // The template's source (the server reads its tool-call format off it: answers/tool_calls.h).
  const std::string& source() const { return source_; }
  // The template's source mentions `s` (say </think>, for --reasoning-parser).
  bool mentions(std::string_view s) const { return source_.find(s) != std::string::npos; }

  static chat::Value message(const std::string& role, const std::string& content);

 private:
  std::shared_ptr<const tok::Tokenizer> tokenizer_;
  std::unique_ptr<chat::ChatTemplate> template_;
  chat::Dict special_tokens_;
  std::vector<int32_t> end_of_turn_;
  std::string source_;
};

}  // namespace attnzoo
