#pragma once
// Reading a GGUF file's `tokenizer.ggml.*` metadata into a GgufVocab (the file side of gguf_vocab.h).
#include <memory>
#include <string>

#include "loader/gguf.h"
#include "tokenizer/gguf_vocab.h"

namespace attnzoo::tok {

// The vocabulary the file's metadata describes. Optional keys (scores, token_type, merges, pre, the special-token
// ids, add_bos_token / add_eos_token) stay empty / unset when absent, so tokenizer_from_gguf_vocab applies
// llama.cpp's defaults. LoadError naming the file and key for a missing tokenizer or a key of the wrong type.
GgufVocab read_gguf_vocab(const GgufFile& file);

// tokenizer_from_gguf_vocab(read_gguf_vocab(file)), with the file named in any error.
std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const GgufFile& file);

}  // namespace attnzoo::tok
