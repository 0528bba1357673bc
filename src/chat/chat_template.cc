#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/error.h"
#include "chat/parser.h"
#include "loader/gguf.h"
#include "loader/json.h"
#include "loader/load_error.h"
#include "loader/model_dir.h"

namespace attnzoo::chat {

ChatTemplate::ChatTemplate(std::string_view source, const Limits& limits)
    : body_(std::make_shared<const Body>(parse(source, limits.max_nesting))), limits_(limits) {}

std::string ChatTemplate::render(const Dict& context) const {
  std::string out;
  Interpreter in(limits_, &out);
  in.render(*body_, context);
  return out;
}

std::string ChatTemplate::render_json(std::string_view context_json) const {
  const json::Value j = json::parse(context_json);
  if (!j.is_object()) throw ArgumentError("context: expected a JSON object of template variables");
  const Value v = Value::from_json(j);
  return render(v.as_dict());
}

Dict chat_context(const Value& messages, bool add_generation_prompt, const Dict& special_tokens, const Dict& extra) {
  Dict d;
  d.set("messages", messages);
  d.set("tools", Value::none());
  d.set("documents", Value::none());
  d.set("add_generation_prompt", Value::boolean(add_generation_prompt));
  for (const auto& [k, v] : special_tokens.items) d.set(k, v);
  for (const auto& [k, v] : extra.items) d.set(k, v);
  return d;
}

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw LoadError(path.string() + ": cannot be read");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A special token in tokenizer_config.json: a string, or an AddedToken object with "content".
std::optional<std::string> token_string(const json::Value& config, const char* key, const std::string& file) {
  const json::Value* v = config.find(key);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->as_string();
  const json::Value* content = v->is_object() ? v->find("content") : nullptr;
  if (content && content->is_string()) return content->as_string();
  throw LoadError(file + ": " + key + ": expected a string or an object with a string \"content\"");
}

std::string pick_template(const json::Value& field, const std::string& name, const std::string& file, std::string* origin) {
  if (field.is_string()) {
    if (!name.empty()) throw LoadError(file + ": chat_template: has one unnamed template, not '" + name + "'");
    *origin = file + " chat_template";
    return field.as_string();
  }
  if (!field.is_array()) throw LoadError(file + ": chat_template: expected a string or a list of named templates");
  const std::string want = name.empty() ? "default" : name;
  std::string names;
  for (size_t i = 0; i < field.as_array().size(); ++i) {
    const json::Value& t = field.as_array()[i];
    const json::Value* n = t.find("name");
    const json::Value* text = t.find("template");
    if (!n || !n->is_string() || !text || !text->is_string()) {
      throw LoadError(file + ": chat_template[" + std::to_string(i) + "]: expected {\"name\": string, \"template\": string}");
    }
    if (n->as_string() == want) {
      *origin = file + " chat_template '" + want + "'";
      return text->as_string();
    }
    names += (names.empty() ? "" : ", ") + n->as_string();
  }
  throw LoadError(file + ": chat_template: no template named '" + want + "' (it has: " + names + ")");
}

// A GGUF's template: tokenizer.chat_template, or tokenizer.chat_template.NAME for a named one (llama.cpp's
// converter writes tokenizer_config.json's named templates so); the special-token strings from the ids it names.
std::optional<ChatTemplateInfo> gguf_chat_template(const GgufFile& f, const std::string& name) {
  const bool named = !name.empty() && name != "default";
  const std::string key = named ? "tokenizer.chat_template." + name : "tokenizer.chat_template";
  if (!f.has(key)) {
    if (named) throw LoadError(f.path() + ": no chat template named '" + name + "' (key '" + key + "' is absent)");
    return std::nullopt;
  }
  ChatTemplateInfo info;
  info.source = f.get_string(key);
  info.origin = f.path() + " " + key;
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->is_array() || tokens->elem_type() != GgufType::STRING) return info;
  const std::pair<const char*, const char*> specials[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                                          {"eos_token", "tokenizer.ggml.eos_token_id"},
                                                          {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                                          {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [var, id_key] : specials) {
    if (!f.has(id_key)) continue;
    const int64_t id = f.get_int(id_key);
    if (id < 0 || uint64_t(id) >= tokens->size())
      throw LoadError(f.path() + ": key '" + id_key + "': token id " + std::to_string(id) + " is outside the vocabulary");
    info.special_tokens.set(var, Value::string(tokens->strings()[size_t(id)]));
  }
  return info;
}

}  // namespace

std::optional<ChatTemplateInfo> load_chat_template(const std::string& model_dir, const std::string& name) {
  namespace fs = std::filesystem;
  // A GGUF file, or a directory holding one and no Hugging Face tokenizer files: the GGUF's own template.
  std::error_code ec;
  if (fs::is_regular_file(model_dir, ec) ||
      (fs::is_directory(model_dir, ec) && !fs::exists(fs::path(model_dir) / "tokenizer_config.json", ec) &&
       !fs::exists(fs::path(model_dir) / "chat_template.jinja", ec))) {
    if (auto gguf = find_model_gguf(model_dir)) return gguf_chat_template(*GgufFile::open_shared(*gguf), name);
  }
  ChatTemplateInfo info;
  const fs::path config_path = fs::path(model_dir) / "tokenizer_config.json";
  std::optional<json::Value> config;
  if (fs::exists(config_path)) {
    const std::string file = config_path.string();
    try {
      config = json::parse(read_file(config_path));
    } catch (const json::ParseError& e) {
      throw LoadError(file + ": " + e.what());
    }
    if (!config->is_object()) throw LoadError(file + ": expected a JSON object");
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      if (auto s = token_string(*config, key, file)) info.special_tokens.set(key, Value::string(*s));
    }
  }
  // Template files win over tokenizer_config.json entries, as in transformers: chat_template.jinja is the
  // default, additional_chat_templates/NAME.jinja the named ones.
  const bool plain_name = name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                          std::string::npos;
  const fs::path jinja = name.empty() || name == "default"
                             ? fs::path(model_dir) / "chat_template.jinja"
                             : fs::path(model_dir) / "additional_chat_templates" / (name + ".jinja");
  if (plain_name && fs::exists(jinja)) {
    info.source = read_file(jinja);
    info.origin = jinja.string();
    return info;
  }
  const json::Value* field = config ? config->find("chat_template") : nullptr;
  if (!field || field->is_null()) {
    if (!name.empty()) throw LoadError(model_dir + ": no named chat templates (asked for '" + name + "')");
    return std::nullopt;
  }
  info.source = pick_template(*field, name, config_path.string(), &info.origin);
  return info;
}

}  // namespace attnzoo::chat
