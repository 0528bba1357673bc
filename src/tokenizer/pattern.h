#pragma once
// The {"String": "..."} / {"Regex": "..."} patterns that Split, Replace and friends carry in tokenizer.json.
#include <memory>
#include <string>

#include "loader/json.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"

namespace attnzoo::tok {

// Compiles the pattern at `path`; throws LoadError naming the field for a bad shape or an invalid regex.
std::shared_ptr<const Regex> read_pattern(const json::Value& v, const std::string& path, const JsonFields& f);

// Compiles a regex the file supplied; errors name the field.
std::shared_ptr<const Regex> compile_field(const std::string& pattern, bool literal, const std::string& path,
                                           const JsonFields& f);

// Every match of `re` in `text` replaced by `content`.
std::string replace_all(const Regex& re, const std::string& text, const std::string& content);

}  // namespace attnzoo::tok
