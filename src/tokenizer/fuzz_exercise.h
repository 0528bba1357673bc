#pragma once
// What a fuzzer does with one tokenizer.json: load it, and when it is accepted, encode and decode a few texts
// that reach every stage (normalizer, added tokens, pre-tokenizer regexes, BPE, post-processor, decoder).
// Shared by the in-tree mutation fuzz test and fuzz/tokenizer_fuzz.cc.
// Contract: returns normally or throws ArgumentError (LoadError for the file); anything else is a bug.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace attnzoo::fuzzing {

inline bool exercise_tokenizer(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto t = tok::Tokenizer::from_json(text, "fuzz.json");
  static const char* const kTexts[] = {"hi hi", "hi<eos>hi", "\xC3\xA9 e\xCC\x81 \xE2\x96\x81x", "  \t\n 12345",
                                       "", "<s>a<unk>b</s>", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab"};
  volatile size_t sink = 0;
  for (const char* s : kTexts) {
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = t->encode(s, special);
      sink = sink + t->decode(ids).size() + t->decode(ids, true).size();
    }
  }
  return true;
}

}  // namespace attnzoo::fuzzing
