#include "convert/tokenizer_metadata.h"

#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "chat/chat_template.h"
#include "loader/json.h"
#include "loader/load_error.h"
#include "loader/mapped_file.h"
#include "tokenizer/gguf_pre_tokenizer.h"

namespace attnzoo {
namespace {

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

std::optional<json::Value> read_json(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  const auto file = MappedFile::open(path, uint64_t(1) << 30);
  try {
    return json::parse(std::string_view(reinterpret_cast<const char*>(file->data()), file->size()));
  } catch (const json::ParseError& e) {
    throw LoadError(path + ": " + e.what());
  }
}

// A special token as tokenizer_config.json writes it: a string or {"content": ...}.
std::optional<std::string> token_text(const json::Value* v) {
  if (!v) return std::nullopt;
  if (v->is_string()) return v->as_string();
  if (v->is_object())
    if (const json::Value* c = v->find("content"); c && c->is_string()) return c->as_string();
  return std::nullopt;
}

// The llama.cpp pre-tokenizer name whose regexes are the tokenizer.json's: a Split regex, GPT-2's own ByteLevel
// regex, or SmolLM / StarCoder's single digits before it.
std::string pre_tokenizer_name(const json::Value& tok, const std::string& path) {
  const json::Value* pre = tok.find("pre_tokenizer");
  std::vector<const json::Value*> steps;
  if (pre && pre->is_object()) {
    const json::Value* type = pre->find("type");
    if (type && type->is_string() && type->as_string() == "Sequence" && pre->find("pretokenizers")) {
      for (const json::Value& s : pre->find("pretokenizers")->as_array()) steps.push_back(&s);
    } else {
      steps.push_back(pre);
    }
  }
  std::vector<std::string> patterns;
  bool digits = false;
  for (const json::Value* s : steps) {
    const json::Value* type = s->find("type");
    const std::string t = type && type->is_string() ? type->as_string() : "";
    if (t == "Split") {
      const json::Value* p = s->find("pattern");
      const json::Value* r = p ? p->find("Regex") : nullptr;
      if (r && r->is_string()) patterns.push_back(r->as_string());
    } else if (t == "ByteLevel") {
      const json::Value* re = s->find("use_regex");
      if (!re || (re->is_bool() && re->as_bool())) patterns.push_back("<gpt2>");
    } else if (t == "Digits") {
      digits = true;
    }
  }
  const std::string gpt2 = tok::find_gguf_pre_tokenizer("gpt-2")->patterns.at(0);
  for (std::string& p : patterns)
    if (p == "<gpt2>") p = gpt2;
  if (digits && patterns.size() == 1 && patterns[0] == gpt2) return "smollm";
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "qwen35", "tekken", "gpt-4o", "dbrx"}) {
    const tok::GgufPreTokenizer* known = tok::find_gguf_pre_tokenizer(name);
    if (known && !digits && known->patterns == patterns) return name;
  }
  throw LoadError(path + ": key 'pre_tokenizer': its split rules match none of the pre-tokenizers llama.cpp names "
                  "(known here: gpt-2, smollm, llama-bpe, qwen2, qwen35, tekken, gpt-4o, dbrx)");
}

// The body of add_tokenizer_metadata; its LoadErrors are given the file's name by the caller.
void add_vocabulary(GgufWriter& w, const json::Value& tok_json, const std::string& dir, int64_t vocab_size) {
  const json::Value* tok = &tok_json;
  const std::string path = dir + "/tokenizer.json";
  const json::Value* model = tok->find("model");
  const json::Value* type = model ? model->find("type") : nullptr;
  if (!type || !type->is_string() || type->as_string() != "BPE")
    throw LoadError(path + ": key 'model.type': only byte-level BPE tokenizers can be written as GGUF here");
  const json::Value* vocab = model->find("vocab");
  if (!vocab || !vocab->is_object()) throw LoadError(path + ": key 'model.vocab': expected an object");

  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  for (const auto& [text, id] : vocab->as_object()) by_id[id.as_int()] = {text, kNormal};
  if (const json::Value* added = tok->find("added_tokens"); added && added->is_array()) {
    for (const json::Value& a : added->as_array()) {
      const json::Value* id = a.find("id");
      const json::Value* content = a.find("content");
      const json::Value* special = a.find("special");
      if (!id || !id->is_integer() || !content || !content->is_string())
        throw LoadError("key 'added_tokens': every entry needs an integer 'id' and a string 'content'");
      by_id[id->as_int()] = {content->as_string(),
                             special && special->is_bool() && special->as_bool() ? kControl : kUserDefined};
    }
  }
  if (by_id.empty()) throw LoadError(path + ": the vocabulary is empty");
  const int64_t n = std::max(vocab_size, by_id.rbegin()->first + 1);
  if (by_id.begin()->first < 0 || n > vocab_size)
    throw LoadError(path + ": token id " + std::to_string(by_id.rbegin()->first) + " is outside the embedding's " +
                    std::to_string(vocab_size) + " rows");
  std::vector<std::string> tokens(static_cast<size_t>(n));
  // Ids the tokenizer does not name become "[PADi]" fillers typed UNUSED, as the converter writes them: a
  // user-defined type would make llama.cpp match the literal text "[PADi]" in prompts.
  std::vector<int32_t> types(size_t(n), kUnused);
  std::map<std::string, int64_t> id_of;
  for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [id, entry] : by_id) {
    tokens[size_t(id)] = entry.first;
    types[size_t(id)] = entry.second;
    id_of.emplace(entry.first, id);
  }

  std::vector<std::string> merges;
  if (const json::Value* m = model->find("merges"); m && m->is_array()) {
    for (const json::Value& v : m->as_array()) {
      if (v.is_string()) {
        merges.push_back(v.as_string());
      } else if (v.is_array() && v.as_array().size() == 2) {
        merges.push_back(v.as_array()[0].as_string() + " " + v.as_array()[1].as_string());
      } else {
        throw LoadError(path + ": key 'model.merges': expected \"a b\" strings or [a, b] pairs");
      }
    }
  }

  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre_tokenizer_name(*tok, path));
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);

  // Special ids: tokenizer_config.json's strings looked up in the vocabulary, else config.json's ids.
  const auto tcfg = read_json(dir + "/tokenizer_config.json");
  const auto cfg = read_json(dir + "/config.json");
  auto special_id = [&](const char* hf_key, const char* cfg_key) -> std::optional<int64_t> {
    if (tcfg)
      if (auto text = token_text(tcfg->find(hf_key)))
        if (auto it = id_of.find(*text); it != id_of.end()) return it->second;
    if (cfg)
      if (const json::Value* v = cfg->find(cfg_key)) {
        if (v->is_integer()) return v->as_int();
        if (v->is_array() && !v->as_array().empty() && v->as_array()[0].is_integer()) return v->as_array()[0].as_int();
      }
    return std::nullopt;
  };
  const std::pair<const char*, const char*> specials[] = {
      {"bos_token", "bos_token_id"}, {"eos_token", "eos_token_id"}, {"pad_token", "pad_token_id"}};
  const char* gguf_keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                             "tokenizer.ggml.padding_token_id"};
  for (size_t i = 0; i < 3; ++i)
    if (auto id = special_id(specials[i].first, specials[i].second); id && *id >= 0 && *id < n)
      w.add_u32(gguf_keys[i], uint32_t(*id));
  if (auto unk = token_text(model->find("unk_token")))
    if (auto it = id_of.find(*unk); it != id_of.end()) w.add_u32("tokenizer.ggml.unknown_token_id", uint32_t(it->second));
  if (tcfg)
    for (const char* key : {"add_bos_token", "add_eos_token"})
      if (const json::Value* v = tcfg->find(key); v && v->is_bool())
        w.add_bool(std::string("tokenizer.ggml.") + key, v->as_bool());

  if (auto chat = chat::load_chat_template(dir)) w.add_string("tokenizer.chat_template", chat->source);
}

}  // namespace

bool add_tokenizer_metadata(GgufWriter& w, const std::string& dir, int64_t vocab_size) {
  const std::string path = dir + "/tokenizer.json";
  const auto tok = read_json(path);
  if (!tok) return false;
  try {
    add_vocabulary(w, *tok, dir, vocab_size);
  } catch (const json::ParseError&) {
    throw;
  } catch (const LoadError& e) {
    const std::string m = e.what();
    if (m.rfind(dir, 0) == 0) throw;  // already names its file (tokenizer_config.json, a chat template ...)
    throw LoadError(path + ": " + m);
  }
  return true;
}

}  // namespace attnzoo
