#include "tokenizer/normalizer.h"

#include <vector>

#include "core/utf8.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace attnzoo::tok {
namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(unicode::Form form) : form_(form) {}
  void apply(std::string& text) const override { text = unicode::normalize(text, form_); }

 private:
  unicode::Form form_;
};

class Lowercase final : public Normalizer {
 public:
  void apply(std::string& text) const override { text = unicode::lowercase(text); }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text) const override {
    size_t begin = 0, end = text.size();
    uint32_t cp = 0;
    while (left_ && begin < end) {
      const size_t n = utf8::decode(text, begin, &cp);
      if (!n || !unicode::is_white_space(cp)) break;
      begin += n;
    }
    while (right_ && end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      const size_t n = utf8::decode(text, start, &cp);
      if (!n || !unicode::is_white_space(cp)) break;
      end = start;
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::shared_ptr<const Regex> re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void apply(std::string& text) const override { text = replace_all(*re_, text, content_); }

 private:
  std::shared_ptr<const Regex> re_;
  std::string content_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void apply(std::string& text) const override {
    for (const auto& p : parts_) p->apply(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> read_normalizer(const json::Value& v, const std::string& path, const JsonFields& f) {
  if (v.is_null()) return nullptr;
  const std::string& type = f.type_of(v, path);
  if (type == "NFC") return std::make_unique<UnicodeForm>(unicode::Form::nfc);
  if (type == "NFD") return std::make_unique<UnicodeForm>(unicode::Form::nfd);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(unicode::Form::nfkc);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(unicode::Form::nfkd);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(f.bool_or(v, "strip_left", path, true), f.bool_or(v, "strip_right", path, true));
  if (type == "Prepend")
    return std::make_unique<Prepend>(f.string(f.member(v, "prepend", path), JsonFields::join(path, "prepend")));
  if (type == "Replace")
    return std::make_unique<Replace>(read_pattern(f.member(v, "pattern", path), JsonFields::join(path, "pattern"), f),
                                     f.string(f.member(v, "content", path), JsonFields::join(path, "content")));
  if (type == "Sequence") {
    const std::string list_path = JsonFields::join(path, "normalizers");
    const json::Array& items = f.array(f.member(v, "normalizers", path), list_path).as_array();
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < items.size(); ++i) {
      auto n = read_normalizer(items[i], JsonFields::index(list_path, i), f);
      if (n) parts.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  f.fail(JsonFields::join(path, "type"), "unsupported normalizer '" + type + "' (supported: NFC, NFD, NFKC, NFKD, "
                                          "Lowercase, Strip, Prepend, Replace, Sequence)");
}

}  // namespace attnzoo::tok
