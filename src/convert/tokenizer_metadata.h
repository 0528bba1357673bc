#pragma once
// The tokenizer.ggml.* metadata llama.cpp's converter writes for a byte-level BPE tokenizer.json ("gpt2" model):
// tokens by id (ids the vocabulary skips filled with "[PADn]", as the converter does), token types (normal,
// control for special added tokens, user-defined for other added ones), merges, the pre-tokenizer name llama.cpp
// knows for the tokenizer's split regex, BOS / EOS / UNK / PAD ids, add_bos_token, and the chat template.
#include <cstdint>
#include <string>

#include "loader/gguf_writer.h"

namespace attnzoo {

// Adds the metadata of `dir`'s tokenizer.json (+ tokenizer_config.json, chat_template.jinja, config.json ids).
// vocab_size: the embedding's rows (the token list is padded to it). Returns false when the directory has no
// tokenizer.json (nothing added); LoadError naming the file and key for a tokenizer it cannot describe (not BPE,
// a pre-tokenizer llama.cpp has no name for, more tokens than the embedding has rows).
bool add_tokenizer_metadata(GgufWriter& w, const std::string& dir, int64_t vocab_size);

}  // namespace attnzoo
