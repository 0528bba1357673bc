#pragma once
// Hugging Face chat templates: a Jinja2 subset interpreter that renders a conversation exactly as transformers'
// apply_chat_template does (trim_blocks, lstrip_blocks, its tojson / raise_exception / strftime_now), and the
// lookup of a checkpoint's template and special-token strings.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chat/interpreter.h"
#include "chat/value.h"

namespace attnzoo::chat {

class ChatTemplate {
 public:
  // Parses `source` once; throws TemplateError (syntax) naming the line and column.
  explicit ChatTemplate(std::string_view source, const Limits& limits = {});
  // Renders with `context` as the template's variables (messages, add_generation_prompt, tools, documents,
  // bos_token, ... and any extra keyword). Throws TemplateError.
  std::string render(const Dict& context) const;
  // The same, the context given as a JSON object text (Python passes json.dumps of its kwargs).
  std::string render_json(std::string_view context_json) const;

 private:
  std::shared_ptr<const Body> body_;
  Limits limits_;
};

// What a checkpoint directory says about chat formatting.
struct ChatTemplateInfo {
  std::string source;   // the template text
  std::string origin;   // the file (and key) it came from, for messages
  Dict special_tokens;  // bos_token, eos_token, unk_token, pad_token strings that tokenizer_config.json sets
};

// The checkpoint's chat template, found as transformers finds it: chat_template.jinja, else tokenizer_config.json
// "chat_template" (a string, or a list of {"name", "template"} where "default" wins). `name` chooses a named one:
// additional_chat_templates/NAME.jinja, else the list entry. nullopt when the directory has no template at all;
// LoadError for unreadable or malformed files and for a named template that is missing. This is the one place
// that knows where templates live.
std::optional<ChatTemplateInfo> load_chat_template(const std::string& model_dir, const std::string& name = "");

// transformers' template inputs: {"messages": ..., "tools": ..., "documents": ..., "add_generation_prompt": ...},
// then the special-token strings, then `extra` (which wins, as kwargs do in transformers).
Dict chat_context(const Value& messages, bool add_generation_prompt, const Dict& special_tokens,
                  const Dict& extra = {});

}  // namespace attnzoo::chat
