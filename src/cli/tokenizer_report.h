#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {

// The bytes one token decodes to (possibly a partial UTF-8 sequence).
std::string piece_of(const tok::Tokenizer& t, int32_t id);

// Prints statistics of `t` over the lines of the file at `path` (tokens per byte, token lengths, longest numeric
// run, lines that do not decode back to themselves, encode speed). Returns the exit status (0).
int print_tokenizer_report(const tok::Tokenizer& t, const std::string& path);

}  // namespace attnzoo::cli
