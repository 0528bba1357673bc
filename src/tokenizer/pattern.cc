#include "tokenizer/pattern.h"

#include <stdexcept>

namespace attnzoo::tok {

std::shared_ptr<const Regex> compile_field(const std::string& pattern, bool literal, const std::string& path,
                                           const JsonFields& f) {
  // PCRE2 reads options such as (*NO_JIT) or (*LIMIT_MATCH=...) at the start of a pattern; Oniguruma, whose
  // syntax these files are written in, has none, and they would change how every encode runs.
  if (!literal && pattern.size() >= 2 && pattern[0] == '(' && pattern[1] == '*')
    f.fail(path, "starts with a PCRE2 option '(*...)'; tokenizer patterns are Oniguruma syntax, which has none");
  try {
    return std::make_shared<const Regex>(pattern, literal, path);
  } catch (const std::runtime_error& e) {
    f.fail(path, e.what());
  }
}

std::shared_ptr<const Regex> read_pattern(const json::Value& v, const std::string& path, const JsonFields& f) {
  f.object(v, path);
  if (const json::Value* s = v.find("String")) return compile_field(f.string(*s, path + ".String"), true, path + ".String", f);
  if (const json::Value* r = v.find("Regex")) return compile_field(f.string(*r, path + ".Regex"), false, path + ".Regex", f);
  f.fail(path, "expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string replace_all(const Regex& re, const std::string& text, const std::string& content) {
  std::string out;
  size_t prev = 0;
  for (auto [s, e] : re.find_all(text)) {
    out.append(text, prev, s - prev);
    out += content;
    prev = e;
  }
  out.append(text, prev, std::string::npos);
  return out;
}

}  // namespace attnzoo::tok
