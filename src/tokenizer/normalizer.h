#pragma once
// Normalizers from tokenizer.json: NFC/NFD/NFKC/NFKD, Lowercase, Strip, Prepend, Replace and Sequence.
// Each rewrites one piece of (valid UTF-8) text in place.
#include <memory>
#include <string>

#include "loader/json.h"
#include "tokenizer/json_fields.h"

namespace attnzoo::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& text) const = 0;
};

// nullptr for a JSON null. Throws LoadError naming the field for unknown types or bad members.
std::unique_ptr<Normalizer> read_normalizer(const json::Value& v, const std::string& path, const JsonFields& f);

}  // namespace attnzoo::tok
