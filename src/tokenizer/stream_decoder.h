#pragma once
// Incremental detokenization for generation: feed ids one at a time, get back the text they complete. A character
// split across tokens (byte-level BPE and byte fallback spell many characters over several tokens) is held back
// until its last byte arrives, so the output never contains half a UTF-8 character; bytes that can never complete
// a character come out as U+FFFD.
//
// Decoders such as Metaspace or Strip treat a token differently by position, so each step re-decodes a short
// window of recent ids and emits only what lies beyond the text already emitted from that window.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace attnzoo::tok {

class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens = false);

  // The text that `id` completes (often empty while a character is still partial).
  std::string push(int32_t id);
  // Whatever is still held back, with incomplete characters replaced by U+FFFD; resets the stream.
  std::string finish();

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  std::vector<int32_t> window_;  // ids whose decoding is not entirely emitted, plus one id of context
  size_t emitted_ = 0;           // bytes of decode_bytes(window_) already returned
};

}  // namespace attnzoo::tok
