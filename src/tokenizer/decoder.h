#pragma once
// Decoders from tokenizer.json: ByteLevel, ByteFallback, Replace, Fuse, Strip, Metaspace and Sequence. A decoder
// rewrites the list of token strings (decode_chain); the text is their concatenation.
//
// `raw` mode is for streaming: ByteLevel and ByteFallback then keep the bytes they produce as they are (possibly
// half a character) instead of replacing invalid UTF-8, so the stream decoder can tell "incomplete" from
// "invalid".
#include <memory>
#include <string>
#include <vector>

#include "loader/json.h"
#include "tokenizer/json_fields.h"

namespace attnzoo::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens, bool raw) const = 0;
};

std::unique_ptr<Decoder> read_decoder(const json::Value& v, const std::string& path, const JsonFields& f);

}  // namespace attnzoo::tok
