#pragma once
// A tokenizer of 64 one-character tokens, '!' (id 0) to '`' (id 63): BPE without merges, so a request's text maps
// to ids character by character, for the server's request-parsing tests.
#include <memory>
#include <string>

#include "loader/json.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::testing {

inline constexpr int kCharVocab = 64;

inline const tok::Tokenizer& char_tokenizer() {
  static const std::shared_ptr<const tok::Tokenizer> t = [] {
    std::string vocab;
    for (int id = 0; id < kCharVocab; ++id)
      vocab += (id ? ", " : "") + json::quote(std::string(1, char(0x21 + id))) + ": " + std::to_string(id);
    return tok::Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})",
                                     "chars.json");
  }();
  return *t;
}

}  // namespace attnzoo::testing
