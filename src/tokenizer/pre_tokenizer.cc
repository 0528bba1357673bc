#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"

namespace attnzoo::tok {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Unicode White_Space, spelled out: PCRE2's \s also takes U+180E, which Rust's char::is_whitespace does not.
constexpr const char* kWhiteSpaceClass = R"([\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}])";

using Range = std::pair<size_t, size_t>;

// Replaces each piece still to tokenize by the sub-pieces `split` returns for its text.
template <typename SplitFn>
void split_pieces(Pieces& pieces, SplitFn&& split) {
  Pieces out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    for (auto [s, e] : split(p.text)) out.push_back(Piece{p.text.substr(s, e - s), -1, p.at_start && s == 0});
  }
  pieces = std::move(out);
}

class Split final : public PreTokenizer {
 public:
  Split(std::shared_ptr<const Regex> re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void apply(Pieces& pieces) const override {
    split_pieces(pieces, [&](const std::string& t) { return split_text(*re_, t, behavior_, invert_); });
  }

 private:
  std::shared_ptr<const Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) re_ = std::make_shared<const Regex>(kGpt2Pattern, false);
  }
  void apply(Pieces& pieces) const override {
    if (add_prefix_space_)
      for (Piece& p : pieces)
        if (p.id < 0 && (p.text.empty() || p.text[0] != ' ')) p.text = " " + p.text;
    if (re_)
      split_pieces(pieces, [&](const std::string& t) { return split_text(*re_, t, SplitBehavior::isolated, false); });
    for (Piece& p : pieces)
      if (p.id < 0) p.text = byte_level::encode(p.text);
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> re_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { always, first, never };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split),
        re_(std::make_shared<const Regex>(replacement_, true)) {}
  void apply(Pieces& pieces) const override {
    for (Piece& p : pieces) {
      if (p.id >= 0) continue;
      std::string t;
      for (char c : p.text) c == ' ' ? t += replacement_ : t += c;
      const bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::always || (prepend_ == Prepend::first && p.at_start)))
        t.insert(0, replacement_);
      p.text = std::move(t);
    }
    if (split_)
      split_pieces(pieces, [&](const std::string& t) {
        return split_text(*re_, t, SplitBehavior::merged_with_next, false);
      });
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
  std::shared_ptr<const Regex> re_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(Pieces& pieces) const override {
    for (const auto& p : parts_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

SplitBehavior read_behavior(const std::string& name, const std::string& path, const JsonFields& f) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  f.fail(path, "unknown split behavior '" + name + "'");
}

std::unique_ptr<PreTokenizer> regex_split(const std::string& pattern, SplitBehavior b, bool invert) {
  return std::make_unique<Split>(std::make_shared<const Regex>(pattern, false), b, invert);
}

}  // namespace

std::vector<Range> split_text(const Regex& re, std::string_view text, SplitBehavior behavior, bool invert) {
  auto parts = split_by_matches(re, text);
  if (invert)
    for (auto& p : parts) p.second = !p.second;
  std::vector<std::pair<Range, bool>> merged;  // (range, is_match)
  switch (behavior) {
    case SplitBehavior::removed:
      for (auto& p : parts)
        if (!p.second) merged.push_back(p);
      break;
    case SplitBehavior::isolated:
      merged = std::move(parts);
      break;
    case SplitBehavior::merged_with_previous: {
      bool previous_match = false;
      for (auto& [r, m] : parts) {
        if (m && !previous_match && !merged.empty()) merged.back().first.second = r.second;
        else merged.push_back({r, m});
        previous_match = m;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool previous_match = false;
      for (size_t k = parts.size(); k-- > 0;) {
        auto& [r, m] = parts[k];
        if (m && !previous_match && !merged.empty()) merged.back().first.first = r.first;
        else merged.push_back({r, m});
        previous_match = m;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case SplitBehavior::contiguous: {
      bool previous_match = false;
      for (auto& [r, m] : parts) {
        if (m == previous_match && !merged.empty()) merged.back().first.second = r.second;
        else merged.push_back({r, m});
        previous_match = m;
      }
      break;
    }
  }
  std::vector<Range> out;
  out.reserve(merged.size());
  for (auto& [r, m] : merged)
    if (r.first != r.second) out.push_back(r);
  return out;
}

std::unique_ptr<PreTokenizer> read_pre_tokenizer(const json::Value& v, const std::string& path, const JsonFields& f) {
  if (v.is_null()) return nullptr;
  const std::string& type = f.type_of(v, path);
  if (type == "Split") {
    auto re = read_pattern(f.member(v, "pattern", path), JsonFields::join(path, "pattern"), f);
    const std::string bpath = JsonFields::join(path, "behavior");
    const SplitBehavior b = read_behavior(f.string(f.member(v, "behavior", path), bpath), bpath, f);
    return std::make_unique<Split>(std::move(re), b, f.bool_or(v, "invert", path, false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(f.bool_or(v, "add_prefix_space", path, true), f.bool_or(v, "use_regex", path, true));
  if (type == "Digits")
    return regex_split(R"(\p{N})", f.bool_or(v, "individual_digits", path, false) ? SplitBehavior::isolated
                                                                                   : SplitBehavior::contiguous, false);
  if (type == "Whitespace") return regex_split(R"(\w+|[^\w\s]+)", SplitBehavior::removed, true);
  if (type == "WhitespaceSplit") return regex_split(std::string(kWhiteSpaceClass) + "+", SplitBehavior::removed, false);
  if (type == "Metaspace") {
    const std::string replacement = f.string_or(v, "replacement", path, "\xE2\x96\x81");
    if (replacement.empty()) f.fail(JsonFields::join(path, "replacement"), "must not be empty");
    Metaspace::Prepend prepend = f.bool_or(v, "add_prefix_space", path, true) ? Metaspace::Prepend::always
                                                                                : Metaspace::Prepend::never;
    if (const json::Value* s = f.optional(v, "prepend_scheme")) {
      const std::string spath = JsonFields::join(path, "prepend_scheme");
      const std::string& name = f.string(*s, spath);
      if (name == "always") prepend = Metaspace::Prepend::always;
      else if (name == "first") prepend = Metaspace::Prepend::first;
      else if (name == "never") prepend = Metaspace::Prepend::never;
      else f.fail(spath, "unknown prepend scheme '" + name + "'");
    }
    return std::make_unique<Metaspace>(replacement, prepend, f.bool_or(v, "split", path, true));
  }
  if (type == "Sequence") {
    const std::string list_path = JsonFields::join(path, "pretokenizers");
    const json::Array& items = f.array(f.member(v, "pretokenizers", path), list_path).as_array();
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < items.size(); ++i) {
      auto p = read_pre_tokenizer(items[i], JsonFields::index(list_path, i), f);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  f.fail(JsonFields::join(path, "type"), "unsupported pre-tokenizer '" + type + "' (supported: Split, ByteLevel, "
                                          "Digits, Metaspace, Whitespace, WhitespaceSplit, Sequence)");
}

}  // namespace attnzoo::tok
