#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <mutex>
#include <stdexcept>

#include "core/error.h"
#include "core/utf8.h"

namespace attnzoo::tok {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string field;
};

Regex::Regex(const std::string& pattern, bool literal, std::string field) : impl_(std::make_unique<Impl>()) {
  impl_->field = std::move(field);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP together with LITERAL (and a literal has no classes for it to affect).
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                              &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error, buffer, sizeof buffer);
    throw std::runtime_error(std::string("invalid regex at offset ") + std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(buffer));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  // Match data is per call: the same Regex may be used by several threads.
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (search_from <= text.size()) {
    // The text was validated once by the caller; skipping PCRE2's check keeps long inputs linear.
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), search_from,
                                                PCRE2_NO_UTF_CHECK, md, nullptr)
                              : pcre2_match(impl_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK,
                                            md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      PCRE2_UCHAR buffer[256];
      pcre2_get_error_message(rc, buffer, sizeof buffer);
      throw ArgumentError(impl_->field + ": regex match failed: " + reinterpret_cast<const char*>(buffer) +
                          " (PCRE2 error " + std::to_string(rc) + ")");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {
      // An empty match right where the previous one ended is skipped and the search moves on one character
      // (the onig crate's rule against endless loops).
      if (search_from >= text.size()) break;
      search_from += utf8::char_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    out.emplace_back(s, e);
    have_last = true;
    last_end = e;
    search_from = e;
  }
  pcre2_match_data_free(md);
  return out;
}

std::vector<std::pair<std::pair<size_t, size_t>, bool>> split_by_matches(const Regex& re, std::string_view text) {
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> out;
  size_t prev = 0;
  for (auto [s, e] : re.find_all(text)) {
    if (prev != s) out.push_back({{prev, s}, false});
    out.push_back({{s, e}, true});
    prev = e;
  }
  if (prev != text.size()) out.push_back({{prev, text.size()}, false});
  return out;
}

}  // namespace attnzoo::tok
