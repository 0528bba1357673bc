#include "tokenizer/gguf_vocab.h"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "core/utf8.h"
#include "loader/load_error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_pre_tokenizer.h"
#include "tokenizer/merges_from_scores.h"
#include "tokenizer/normalizer.h"

namespace attnzoo::tok {
namespace {

const std::string kPrefix = "tokenizer.ggml.";
const char* const kMetaspace = "\xE2\x96\x81";  // "▁"
// Real vocabularies need well under 1e8 (256k tokens of a few dozen bytes); this allows a few seconds of work.
constexpr uint64_t kMaxMergeDerivationWork = uint64_t(1) << 32;

[[noreturn]] void fail(const std::string& key, const std::string& message) {
  throw LoadError(kPrefix + key + ": " + message);
}
std::string at(const char* key, size_t i) { return std::string(key) + "[" + std::to_string(i) + "]"; }

// The components are described as tokenizer.json would describe them and read by the same readers, so a GGUF
// vocabulary runs exactly the pipeline a tokenizer.json with these components runs.
json::Value str(std::string s) { return json::Value::make_string(std::move(s)); }
json::Value num(int64_t i) { return json::Value::make_number(double(i), true, i); }
json::Value flag(bool b) { return json::Value::make_bool(b); }
json::Value arr(json::Array items) { return json::Value::make_array(std::move(items)); }
json::Value obj(json::Object members) { return json::Value::make_object(std::move(members)); }
json::Value typed(const char* type, json::Object members = {}) {
  members.emplace_back("type", str(type));
  return obj(std::move(members));
}

// Every character one of the 256 the byte-level alphabet uses (such a token spells bytes, not text).
bool in_byte_alphabet(const std::string& token) {
  for (size_t i = 0; i < token.size();) {
    uint32_t cp = 0;
    const size_t n = utf8::decode(token, i, &cp);
    if (n == 0 || byte_level::byte_for_char(cp) < 0) return false;
    i += n;
  }
  return true;
}

void validate(const GgufVocab& v) {
  if (v.model.empty()) fail("model", "missing");
  if (v.model != "gpt2" && v.model != "llama")
    fail("model", "unsupported tokenizer model '" + v.model + "' (supported: gpt2, llama)");
  const size_t n = v.tokens.size();
  if (n == 0) fail("tokens", "missing or empty");
  if (n > size_t(kMaxTokenId))
    fail("tokens", std::to_string(n) + " tokens, more than the " + std::to_string(kMaxTokenId) + " supported");
  for (size_t i = 0; i < n; ++i)
    if (!utf8::is_valid(v.tokens[i])) fail(at("tokens", i), "not valid UTF-8");
  if (!v.scores.empty() && v.scores.size() != n)
    fail("scores", std::to_string(v.scores.size()) + " scores for " + std::to_string(n) + " tokens");
  for (size_t i = 0; i < v.scores.size(); ++i)
    if (std::isnan(v.scores[i])) fail(at("scores", i), "NaN");
  if (!v.token_types.empty() && v.token_types.size() != n)
    fail("token_type", std::to_string(v.token_types.size()) + " types for " + std::to_string(n) + " tokens");
  for (size_t i = 0; i < v.token_types.size(); ++i)
    if (v.token_types[i] < 0 || v.token_types[i] > int32_t(GgufTokenType::byte))
      fail(at("token_type", i), std::to_string(v.token_types[i]) + " is not a token type (0..6)");
  const std::pair<const char*, int64_t> ids[] = {{"bos_token_id", v.bos}, {"eos_token_id", v.eos},
                                                 {"eot_token_id", v.eot}, {"unknown_token_id", v.unk},
                                                 {"padding_token_id", v.pad}};
  for (const auto& [key, id] : ids)
    if (id != -1 && (id < 0 || uint64_t(id) >= n))
      fail(key, std::to_string(id) + " is not a token id (the vocabulary has " + std::to_string(n) + " tokens)");
}

std::vector<std::pair<std::string, std::string>> read_merges(const GgufVocab& v) {
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    // As llama.cpp splits them: at the first space after the first byte (a left part may itself be " ").
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 == m.size())
      fail(at("merges", i), "expected \"left right\", found '" + m + "'");
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return merges;
}

GgufTokenType type_of(const GgufVocab& v, size_t i) {
  return v.token_types.empty() ? GgufTokenType::normal : GgufTokenType(v.token_types[i]);
}

std::unique_ptr<Bpe> make_model(const GgufVocab& v, const GgufPreTokenizer* pre) {
  const bool byte_level = v.model == "gpt2";
  Vocab vocab;
  vocab.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    // A later duplicate takes the token over, as a Python dict built from the list does.
    vocab.insert_or_assign(byte_level && !in_byte_alphabet(t) ? byte_level::encode(t) : t, int32_t(i));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (!v.merges.empty()) {
    merges = read_merges(v);
  } else if (!byte_level) {
    if (v.scores.empty()) fail("scores", "missing: a vocabulary without merges needs scores to derive them from");
    // Deriving merges looks up both halves of every cut of every token: quadratic in a token's length, so a file
    // of absurdly long tokens must not be able to stall the load.
    uint64_t work = 0;
    for (const std::string& t : v.tokens) work += uint64_t(t.size()) * t.size();
    if (work > kMaxMergeDerivationWork)
      fail("tokens", "tokens too long to derive merges from (sum of squared lengths " + std::to_string(work) +
                         " > " + std::to_string(kMaxMergeDerivationWork) + ")");
    merges = merges_from_scores(v.tokens, v.scores);
  }
  BpeOptions options;
  if (byte_level) {
    options.ignore_merges = pre->ignore_merges;
  } else {
    options.byte_fallback = true;
    options.fuse_unk = true;
  }
  try {
    return std::make_unique<Bpe>(std::move(vocab), merges, std::move(options));
  } catch (const std::invalid_argument& e) {
    // Derived merges only join tokens of the vocabulary, so a failure names a merge of the file.
    throw LoadError(kPrefix + "merges" + e.what());
  }
}

std::vector<AddedToken> added_tokens(const GgufVocab& v) {
  const bool byte_level = v.model == "gpt2";
  std::vector<AddedToken> out;
  std::unordered_set<std::string> seen;
  auto add = [&](int64_t id, bool special) {
    const std::string& content = v.tokens[size_t(id)];
    if (content.empty() || !seen.insert(content).second) return;
    AddedToken a;
    a.content = content;
    a.id = int32_t(id);
    a.special = special;
    a.normalized = false;
    out.push_back(std::move(a));
  };
  // The named tokens first, as special. transformers registers them whatever their type; we leave out those the
  // file calls ordinary text (normal / unused / byte), which llama.cpp never matches as special either: a padding
  // id that points at "!" must not change how every "!" is read.
  for (int64_t id : {v.bos, v.eos, v.unk, v.pad}) {
    if (id < 0) continue;
    const GgufTokenType type = v.token_types.empty() ? GgufTokenType::undefined : type_of(v, size_t(id));
    if (type != GgufTokenType::normal && type != GgufTokenType::unused && type != GgufTokenType::byte) add(id, true);
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const GgufTokenType type = type_of(v, i);
    if (type != GgufTokenType::control && type != GgufTokenType::user_defined) continue;
    // In a byte-level vocabulary a token spelled outside the byte alphabet is not one the model can produce
    // (llama.cpp mislabels some); transformers leaves those out, and so do we.
    if (byte_level && !in_byte_alphabet(v.tokens[i])) continue;
    add(int64_t(i), type == GgufTokenType::control);
  }
  return out;
}

// SentencePiece-style vocabularies: Llama 2's tokenizer.json normalizer (what llama.cpp does too): spaces become
// "▁" and every run of text between special tokens gets one in front (a text that starts with a space gets two;
// transformers' GGUF loader, whose Metaspace prepends only where none is, differs there).
json::Value normalizer_json(bool add_space_prefix) {
  json::Array parts;
  if (add_space_prefix) parts.push_back(typed("Prepend", {{"prepend", str(kMetaspace)}}));
  parts.push_back(typed("Replace", {{"pattern", obj({{"String", str(" ")}})}, {"content", str(kMetaspace)}}));
  return typed("Sequence", {{"normalizers", arr(std::move(parts))}});
}

json::Value pre_tokenizer_json(const GgufPreTokenizer& pre) {
  json::Array parts;
  for (const std::string& p : pre.patterns)
    parts.push_back(typed("Split", {{"pattern", obj({{"Regex", str(p)}})}, {"behavior", str("Isolated")},
                                    {"invert", flag(false)}}));
  parts.push_back(typed("ByteLevel", {{"add_prefix_space", flag(false)}, {"use_regex", flag(false)}}));
  return typed("Sequence", {{"pretokenizers", arr(std::move(parts))}});
}

json::Value decoder_json(bool byte_level, bool add_space_prefix) {
  if (byte_level) return typed("ByteLevel");
  json::Array parts = {typed("Replace", {{"pattern", obj({{"String", str(kMetaspace)}})}, {"content", str(" ")}}),
                       typed("ByteFallback"), typed("Fuse")};
  // the prefix space comes off again, as llama.cpp's detokenizer takes it off
  if (add_space_prefix) parts.push_back(typed("Strip", {{"content", str(" ")}, {"start", num(1)}, {"stop", num(0)}}));
  return typed("Sequence", {{"decoders", arr(std::move(parts))}});
}

json::Value post_processor_json(const GgufVocab& v, const GgufPreTokenizer* pre) {
  const bool bos_default = pre ? pre->add_bos : true;
  bool add_bos = v.add_bos.value_or(bos_default), add_eos = v.add_eos.value_or(false);
  if (add_bos && v.bos < 0) {
    if (v.add_bos) fail("add_bos_token", "is true, but " + kPrefix + "bos_token_id is not set");
    add_bos = false;  // a default only: transformers drops it too
  }
  if (add_eos && v.eos < 0) fail("add_eos_token", "is true, but " + kPrefix + "eos_token_id is not set");
  json::Array single;
  json::Object specials;
  auto special = [&](const char* name, int64_t id) {
    single.push_back(obj({{"SpecialToken", obj({{"id", str(name)}, {"type_id", num(0)}})}}));
    specials.emplace_back(name, obj({{"id", str(name)}, {"ids", arr({num(id)})}}));
  };
  if (add_bos) special("bos", v.bos);
  single.push_back(obj({{"Sequence", obj({{"id", str("A")}, {"type_id", num(0)}})}}));
  if (add_eos) special("eos", v.eos);
  return typed("TemplateProcessing", {{"single", arr(std::move(single))}, {"special_tokens", obj(std::move(specials))}});
}

}  // namespace

std::shared_ptr<const Tokenizer> tokenizer_from_gguf_vocab(const GgufVocab& v) {
  validate(v);
  const bool byte_level = v.model == "gpt2";
  const GgufPreTokenizer* pre = nullptr;
  if (byte_level) {
    pre = find_gguf_pre_tokenizer(v.pre);
    if (!pre) fail("pre", "unknown pre-tokenizer '" + v.pre + "' (known: " + known_gguf_pre_tokenizers() + ")");
  }
  const JsonFields f("GGUF tokenizer metadata");
  TokenizerParts parts;
  parts.model = make_model(v, pre);
  const bool space_prefix = !byte_level && v.add_space_prefix.value_or(true);
  if (byte_level)
    parts.pre_tokenizer = read_pre_tokenizer(pre_tokenizer_json(*pre), "pre_tokenizer", f);
  else
    parts.normalizer = read_normalizer(normalizer_json(space_prefix), "normalizer", f);
  parts.decoder = read_decoder(decoder_json(byte_level, space_prefix), "decoder", f);
  parts.post_processor = read_post_processor(post_processor_json(v, pre), "post_processor", f);
  parts.added_tokens = added_tokens(v);
  for (int64_t id : {v.eos, v.eot})
    if (id >= 0 && (parts.eos_token_ids.empty() || parts.eos_token_ids[0] != id))
      parts.eos_token_ids.push_back(int32_t(id));
  return Tokenizer::from_parts(std::move(parts));
}

}  // namespace attnzoo::tok
