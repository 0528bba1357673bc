#pragma once
// The pre-tokenizer a GGUF file names in `tokenizer.ggml.pre` (byte-level BPE vocabularies only): the regexes
// llama.cpp applies for that name, one after the other, each splitting the pieces the previous one left (matches
// and the text between them both kept), written as the model's own tokenizer.json spells them.
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo::tok {

struct GgufPreTokenizer {
  std::vector<std::string> patterns;
  bool ignore_merges = false;  // a piece that is itself a token stays whole (Llama 3, Tekken)
  bool add_bos = false;        // llama.cpp's default when the file has no tokenizer.ggml.add_bos_token
};

// nullptr for a name we do not know. An empty name means "default", as in llama.cpp.
const GgufPreTokenizer* find_gguf_pre_tokenizer(std::string_view pre);
// The names find_gguf_pre_tokenizer knows, comma-separated, for error messages.
std::string known_gguf_pre_tokenizers();

}  // namespace attnzoo::tok
