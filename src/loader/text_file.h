#pragma once
// Text a flag names (generate -f, perplexity -f, tokenize --report, quantize --calibration) or stdin, read whole.
// Unlike the files of a model directory (mapped_file.h) a FIFO or a pipe is welcome here, so the size cannot be
// checked before reading: the read itself stops at the limit, and /dev/zero is an error instead of an endless read.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace attnzoo {

// Far above any prompt or evaluation text (wikitext-103's training split is 0.5 GB).
constexpr uint64_t kMaxTextInputBytes = uint64_t(1) << 30;

// Everything `f` holds, byte for byte, at most max_bytes; ArgumentError "<what>: ..." on a read error or past the
// limit.
std::string read_text_stream(std::FILE* f, const std::string& what, uint64_t max_bytes = kMaxTextInputBytes);

// The whole file at `path`, which `flag` names: ArgumentError "<flag>: ..." naming the path when it cannot be
// opened, is a directory, cannot be read or holds more than max_bytes.
std::string read_text_file(const std::string& flag, const std::string& path, uint64_t max_bytes = kMaxTextInputBytes);

// ArgumentError "<what>: not valid UTF-8 (byte N)" unless `text` is valid UTF-8: the tokenizer's own refusal could
// not say which input it was given.
void require_utf8(std::string_view text, const std::string& what);

}  // namespace attnzoo
