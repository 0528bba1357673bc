#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <stdexcept>

#include "core/utf8.h"
#include "loader/mapped_file.h"
#include "loader/model_dir.h"
#include "tokenizer/gguf_file_vocab.h"

namespace attnzoo::tok {
namespace {

json::Value parse_file_text(std::string_view text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::ParseError& e) {
    throw LoadError(name + ": " + e.what());
  }
}

std::unique_ptr<Bpe> read_model(const json::Value& root, const JsonFields& f) {
  const json::Value& m = f.object(f.member(root, "model", ""), "model");
  std::string type = f.string_or(m, "type", "model", "");
  if (type.empty() && m.find("merges")) type = "BPE";  // files from before the tag was written
  if (type != "BPE")
    f.fail("model.type", "unsupported model '" + type + "' (only BPE is supported)");
  if (const json::Value* d = f.optional(m, "dropout")) {
    if (!d->is_number()) f.fail("model.dropout", "expected a number");
    if (d->as_double() != 0.0) f.fail("model.dropout", "BPE dropout is not supported (encoding would be random)");
  }

  Vocab vocab;
  const json::Object& entries = f.object(f.member(m, "vocab", "model"), "model.vocab").as_object();
  vocab.reserve(entries.size());
  for (const auto& [token, id] : entries)
    vocab.emplace(token, int32_t(f.integer(id, "model.vocab." + token, 0, kMaxTokenId)));

  std::vector<std::pair<std::string, std::string>> merges;
  if (const json::Value* mv = f.optional(m, "merges")) {
    const json::Array& items = f.array(*mv, "model.merges").as_array();
    merges.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string path = JsonFields::index("model.merges", i);
      if (items[i].is_string()) {  // legacy "a b"
        const std::string& s = items[i].as_string();
        const size_t space = s.find(' ');
        if (space == std::string::npos) f.fail(path, "expected \"left right\", found '" + s + "'");
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (items[i].is_array()) {
        const json::Array& pair = items[i].as_array();
        if (pair.size() != 2) f.fail(path, "expected a pair of tokens, found " + std::to_string(pair.size()) + " items");
        merges.emplace_back(f.string(pair[0], JsonFields::index(path, 0)), f.string(pair[1], JsonFields::index(path, 1)));
      } else {
        f.fail(path, std::string("expected a string or a pair, found ") + json::kind_name(items[i].kind()));
      }
    }
  }

  BpeOptions opt;
  auto optional_string = [&](const char* key) -> std::optional<std::string> {
    const json::Value* v = f.optional(m, key);
    if (!v) return std::nullopt;
    return f.string(*v, JsonFields::join("model", key));
  };
  opt.unk_token = optional_string("unk_token");
  opt.continuing_subword_prefix = optional_string("continuing_subword_prefix");
  opt.end_of_word_suffix = optional_string("end_of_word_suffix");
  opt.fuse_unk = f.bool_or(m, "fuse_unk", "model", false);
  opt.byte_fallback = f.bool_or(m, "byte_fallback", "model", false);
  opt.ignore_merges = f.bool_or(m, "ignore_merges", "model", false);
  try {
    return std::make_unique<Bpe>(std::move(vocab), merges, std::move(opt));
  } catch (const std::invalid_argument& e) {
    throw LoadError(f.file() + ": model.merges" + e.what());
  }
}

std::vector<AddedToken> read_added_tokens(const json::Value& root, const JsonFields& f) {
  std::vector<AddedToken> out;
  const json::Value* v = f.optional(root, "added_tokens");
  if (!v) return out;
  const json::Array& items = f.array(*v, "added_tokens").as_array();
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = JsonFields::index("added_tokens", i);
    const json::Value& t = f.object(items[i], path);
    AddedToken a;
    a.id = int32_t(f.integer(f.member(t, "id", path), JsonFields::join(path, "id"), 0, kMaxTokenId));
    a.content = f.string(f.member(t, "content", path), JsonFields::join(path, "content"));
    if (a.content.empty()) f.fail(JsonFields::join(path, "content"), "must not be empty");
    a.single_word = f.bool_or(t, "single_word", path, false);
    a.lstrip = f.bool_or(t, "lstrip", path, false);
    a.rstrip = f.bool_or(t, "rstrip", path, false);
    a.special = f.bool_or(t, "special", path, false);
    a.normalized = f.bool_or(t, "normalized", path, !a.special);
    out.push_back(std::move(a));
  }
  return out;
}

// eos_token_id as an int or a list of ints; anything else is ignored (these files are hints, not requirements).
void read_eos_ids(const json::Value& v, std::vector<int32_t>& out) {
  auto take = [&](const json::Value& x) {
    if (x.is_integer() && x.as_int() >= 0 && x.as_int() < kMaxTokenId) out.push_back(int32_t(x.as_int()));
  };
  if (v.is_array())
    for (const auto& x : v.as_array()) take(x);
  else
    take(v);
}

std::optional<json::Value> read_optional_json(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
  const auto file = MappedFile::open(p.string(), kMaxConfigJsonBytes);
  return parse_file_text(std::string_view(reinterpret_cast<const char*>(file->data()), file->size()), p.string());
}

}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::from_json(std::string_view text, const std::string& name) {
  const JsonFields f(name);
  const json::Value root = parse_file_text(text, name);
  f.object(root, "(top level)");

  TokenizerParts parts;
  parts.model = read_model(root, f);
  auto component = [&](const char* key) -> const json::Value& {
    static const json::Value null_value;
    const json::Value* v = root.find(key);
    return v ? *v : null_value;
  };
  parts.normalizer = read_normalizer(component("normalizer"), "normalizer", f);
  parts.pre_tokenizer = read_pre_tokenizer(component("pre_tokenizer"), "pre_tokenizer", f);
  parts.post_processor = read_post_processor(component("post_processor"), "post_processor", f);
  parts.decoder = read_decoder(component("decoder"), "decoder", f);
  parts.added_tokens = read_added_tokens(root, f);
  return from_parts(std::move(parts));
}

std::shared_ptr<const Tokenizer> Tokenizer::from_parts(TokenizerParts parts) {
  if (!parts.model) throw std::invalid_argument("Tokenizer::from_parts: no model");
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->model_ = std::move(parts.model);
  t->normalizer_ = std::move(parts.normalizer);
  t->pre_tokenizer_ = std::move(parts.pre_tokenizer);
  t->post_processor_ = std::move(parts.post_processor);
  t->decoder_ = std::move(parts.decoder);
  t->added_ = std::move(parts.added_tokens);
  t->eos_ids_ = std::move(parts.eos_token_ids);
  Vocab all = t->model_->vocab();
  for (size_t i = 0; i < t->added_.size(); ++i) {
    AddedToken& a = t->added_[i];
    // A token the model already knows keeps the model's id, as the reference's add_tokens does.
    if (auto id = t->model_->token_to_id(a.content)) a.id = *id;
    t->added_by_content_.emplace(a.content, int32_t(i));
    t->added_by_id_.emplace(a.id, i);
    all.emplace(a.content, a.id);
  }
  t->vocab_size_ = all.size();
  // Special tokens are matched before the others, then each set in file order.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < t->added_.size(); ++i) {
      const AddedToken& a = t->added_[i];
      if (a.special != (pass == 0)) continue;
      if (!a.normalized) {
        t->raw_matcher_.add(a.content, int32_t(i));
      } else {
        std::string content = a.content;
        if (t->normalizer_) t->normalizer_->apply(content);
        t->normalized_matcher_.add(content, int32_t(i));
      }
    }
  }
  t->raw_matcher_.finish();
  t->normalized_matcher_.finish();
  return t;
}

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  const fs::path file = is_dir ? fs::path(path) / "tokenizer.json" : fs::path(path);
  // A GGUF carries its tokenizer in its metadata: the file itself, or the one GGUF of a directory without
  // tokenizer.json.
  if (is_dir ? !fs::exists(file, ec) : file.extension() == ".gguf")
    if (auto gguf = find_model_gguf(path)) return tokenizer_from_gguf(*GgufFile::open_shared(*gguf));
  const auto mapped = MappedFile::open(file.string(), kMaxTokenizerJsonBytes);
  auto t = from_json(std::string_view(reinterpret_cast<const char*>(mapped->data()), mapped->size()), file.string());
  if (is_dir) {
    auto* mut = const_cast<Tokenizer*>(t.get());
    for (const char* name : {"generation_config.json", "config.json"}) {
      if (!mut->eos_ids_.empty()) break;
      if (auto cfg = read_optional_json(fs::path(path) / name))
        if (const json::Value* e = cfg->find("eos_token_id")) read_eos_ids(*e, mut->eos_ids_);
    }
    if (mut->eos_ids_.empty()) {
      if (auto cfg = read_optional_json(fs::path(path) / "tokenizer_config.json")) {
        const json::Value* e = cfg->find("eos_token");
        if (e && e->is_object()) e = e->find("content");
        if (e && e->is_string())
          if (auto id = t->token_to_id(e->as_string())) mut->eos_ids_.push_back(*id);
      }
    }
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (!utf8::is_valid(text)) throw ArgumentError("text: not valid UTF-8");
  Pieces pieces{Piece{std::string(text), -1, true}};
  split_on_added(pieces, raw_matcher_, added_);
  if (normalizer_)
    for (Piece& p : pieces)
      if (p.id < 0) normalizer_->apply(p.text);
  split_on_added(pieces, normalized_matcher_, added_);
  if (pre_tokenizer_) pre_tokenizer_->apply(pieces);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Piece& p : pieces) {
    if (p.id >= 0) ids.push_back(p.id);
    else model_->tokenize(p.text, ids);
  }
  if (add_special_tokens && post_processor_) post_processor_->apply(ids);
  return ids;
}

bool Tokenizer::is_special(int32_t id) const {
  const auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_[it->second].special;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto it = added_by_content_.find(token);
  if (it != added_by_content_.end()) return added_[size_t(it->second)].id;
  return model_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return added_[it->second].content;
  if (const std::string* s = model_->id_to_token(id)) return *s;
  return std::nullopt;
}

std::vector<std::string> Tokenizer::tokens_for(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* s = nullptr;
    const auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) s = &added_[it->second].content;
    else s = model_->id_to_token(id);
    if (!s) continue;
    if (skip_special_tokens) {
      // The reference skips by content: any token spelled like a special token goes.
      const auto sp = added_by_content_.find(*s);
      if (sp != added_by_content_.end() && added_[size_t(sp->second)].special) continue;
    }
    tokens.push_back(*s);
  }
  return tokens;
}

std::string Tokenizer::decode_with(std::span<const int32_t> ids, bool skip_special_tokens, bool raw) const {
  std::vector<std::string> tokens = tokens_for(ids, skip_special_tokens);
  std::string out;
  if (decoder_) {
    decoder_->decode_chain(tokens, raw);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_with(ids, skip_special_tokens, false);
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_with(ids, skip_special_tokens, true);
}

}  // namespace attnzoo::tok
