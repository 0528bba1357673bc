#include "engine/chat_turns.h"

#include "chat/error.h"
#include "loader/load_error.h"

namespace attnzoo {

using chat::Value;

Value ChatFormat::message(const std::string& role, const std::string& content) {
  chat::Dict m;
  m.set("role", Value::string(role));
  m.set("content", Value::string(content));
  return Value::dict(std::move(m));
}

std::vector<int32_t> end_of_turn_ids(const chat::ChatTemplate& chat_template, const chat::Dict& special_tokens,
                                     const tok::Tokenizer& tokenizer) {
  static const char* kProbe = "attnzoo-end-of-turn-probe";
  const Value messages = Value::list({ChatFormat::message("user", "hello"), ChatFormat::message("assistant", kProbe)});
  std::string text;
  try {
    text = chat_template.render(chat::chat_context(messages, false, special_tokens));
  } catch (const chat::TemplateError&) {
    return {};  // a template that rejects the probe (say, it needs a system message) gives no hint
  }
  const size_t at = text.rfind(kProbe);
  if (at == std::string::npos) return {};
  const std::vector<int32_t> ids = tokenizer.encode(text.substr(at + std::char_traits<char>::length(kProbe)), false);
  if (ids.empty() || !tokenizer.is_special(ids[0])) return {};
  return {ids[0]};
}

ChatFormat::ChatFormat(const std::string& model_dir, std::shared_ptr<const tok::Tokenizer> tokenizer)
    : tokenizer_(std::move(tokenizer)) {
  auto info = chat::load_chat_template(model_dir);
  if (!info) {
    throw LoadError(model_dir + ": no chat template (neither chat_template.jinja nor a \"chat_template\" in "
                    "tokenizer_config.json)");
  }
  template_ = std::make_unique<chat::ChatTemplate>(info->source);
  source_ = info->source;
  special_tokens_ = std::move(info->special_tokens);
  end_of_turn_ = end_of_turn_ids(*template_, special_tokens_, *tokenizer_);
}

std::string ChatFormat::render(const Value& messages, bool add_generation_prompt, const Value& tools,
                              const chat::Dict& kwargs) const {
  chat::Dict extra = kwargs;
  if (!tools.is_none()) extra.set("tools", tools);
  return template_->render(chat::chat_context(messages, add_generation_prompt, special_tokens_, extra));
}

std::vector<int32_t> ChatFormat::prompt_ids(const Value& messages, bool add_generation_prompt) const {
  return tokenizer_->encode(render(messages, add_generation_prompt), false);
}

}  // namespace attnzoo
