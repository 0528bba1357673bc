#include "tokenizer/gguf_file_vocab.h"

#include <cstring>

#include "loader/load_error.h"

namespace attnzoo::tok {
namespace {

const std::string kPrefix = "tokenizer.ggml.";

// An array of fixed-size scalars of type `want`, copied out of the packed little-endian elements.
template <typename T>
std::vector<T> scalar_array(const GgufFile& f, const std::string& key, GgufType want) {
  const GgufValue& a = f.get_array(key);
  if (a.elem_type() != want)
    throw LoadError(f.path() + ": key '" + key + "': expected an array of " + gguf_type_name(want) + ", got " +
                    gguf_type_name(a.elem_type()));
  std::vector<T> out(a.size());
  if (a.packed().size() != out.size() * sizeof(T))
    throw LoadError(f.path() + ": key '" + key + "': packed size does not match its element count");
  if (!out.empty()) std::memcpy(out.data(), a.packed().data(), a.packed().size());
  return out;
}

std::vector<std::string> string_array(const GgufFile& f, const std::string& key) {
  const GgufValue& a = f.get_array(key);
  if (a.elem_type() != GgufType::STRING)
    throw LoadError(f.path() + ": key '" + key + "': expected an array of strings, got " + gguf_type_name(a.elem_type()));
  return a.strings();
}

}  // namespace

GgufVocab read_gguf_vocab(const GgufFile& f) {
  if (!f.has(kPrefix + "model")) throw LoadError(f.path() + ": no tokenizer (key '" + kPrefix + "model' is absent)");
  GgufVocab v;
  v.model = f.get_string(kPrefix + "model");
  if (f.has(kPrefix + "pre")) v.pre = f.get_string(kPrefix + "pre");
  v.tokens = string_array(f, kPrefix + "tokens");
  if (f.has(kPrefix + "scores")) v.scores = scalar_array<float>(f, kPrefix + "scores", GgufType::F32);
  if (f.has(kPrefix + "token_type")) v.token_types = scalar_array<int32_t>(f, kPrefix + "token_type", GgufType::I32);
  if (f.has(kPrefix + "merges")) v.merges = string_array(f, kPrefix + "merges");
  const std::pair<const char*, int64_t*> ids[] = {{"bos_token_id", &v.bos}, {"eos_token_id", &v.eos},
                                                  {"eot_token_id", &v.eot}, {"unknown_token_id", &v.unk},
                                                  {"padding_token_id", &v.pad}};
  for (const auto& [key, id] : ids)
    if (f.has(kPrefix + key)) *id = f.get_int(kPrefix + key);
  if (f.has(kPrefix + "add_bos_token")) v.add_bos = f.get_bool(kPrefix + "add_bos_token");
  if (f.has(kPrefix + "add_eos_token")) v.add_eos = f.get_bool(kPrefix + "add_eos_token");
  if (f.has(kPrefix + "add_space_prefix")) v.add_space_prefix = f.get_bool(kPrefix + "add_space_prefix");
  return v;
}

std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const GgufFile& file) {
  const GgufVocab v = read_gguf_vocab(file);
  try {
    return tokenizer_from_gguf_vocab(v);
  } catch (const LoadError& e) {
    throw LoadError(file.path() + ": " + e.what());
  }
}

}  // namespace attnzoo::tok
