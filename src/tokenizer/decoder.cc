#include "tokenizer/decoder.h"

#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"

namespace attnzoo::tok {
namespace {

class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::string bytes;
    for (const std::string& t : tokens)
      if (!byte_level::decode_token(t, bytes)) bytes += t;  // a token outside the byte alphabet spells itself
    tokens.assign(1, raw ? std::move(bytes) : utf8::lossy(bytes));
  }
};

class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (raw || utf8::is_valid(bytes)) {
        out.push_back(std::move(bytes));
      } else {
        // One U+FFFD per byte (not per invalid sequence): the reference's rule for byte-fallback runs.
        std::string repl;
        for (size_t i = 0; i < bytes.size(); ++i) utf8::append(repl, utf8::kReplacement);
        out.push_back(std::move(repl));
      }
      bytes.clear();
    };
    for (std::string& t : tokens) {
      int b = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') b = hex_byte(t[3], t[4]);
      if (b >= 0) {
        bytes += char(b);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class Replace final : public Decoder {
 public:
  Replace(std::shared_ptr<const Regex> re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    // The regex engine needs valid UTF-8; a raw token holding a partial character is left as it is.
    for (std::string& t : tokens)
      if (utf8::is_valid(t)) t = replace_all(*re_, t, content_);
  }

 private:
  std::shared_ptr<const Regex> re_;
  std::string content_;
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    const size_t n = content_.size();
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t k = 0; k < start_ && end - begin >= n && t.compare(begin, n, content_) == 0; ++k) begin += n;
      for (size_t k = 0; k < stop_ && end - begin >= n && t.compare(end - n, n, content_) == 0; ++k) end -= n;
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t p = 0; p < t.size();) {
        if (t.compare(p, replacement_.size(), replacement_) == 0) {
          // The reference drops every replacement character of the first token when a prefix was prepended.
          if (!(i == 0 && strip_first_)) out += ' ';
          p += replacement_.size();
        } else {
          out += t[p++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    for (const auto& p : parts_) p->decode_chain(tokens, raw);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> read_decoder(const json::Value& v, const std::string& path, const JsonFields& f) {
  if (v.is_null()) return nullptr;
  const std::string& type = f.type_of(v, path);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Replace")
    return std::make_unique<Replace>(read_pattern(f.member(v, "pattern", path), JsonFields::join(path, "pattern"), f),
                                     f.string(f.member(v, "content", path), JsonFields::join(path, "content")));
  if (type == "Strip") {
    const std::string content = f.string(f.member(v, "content", path), JsonFields::join(path, "content"));
    if (content.empty()) f.fail(JsonFields::join(path, "content"), "must be one character");
    const auto start = f.integer(f.member(v, "start", path), JsonFields::join(path, "start"), 0, 1 << 20);
    const auto stop = f.integer(f.member(v, "stop", path), JsonFields::join(path, "stop"), 0, 1 << 20);
    return std::make_unique<Strip>(content, size_t(start), size_t(stop));
  }
  if (type == "Metaspace") {
    const std::string replacement = f.string_or(v, "replacement", path, "\xE2\x96\x81");
    if (replacement.empty()) f.fail(JsonFields::join(path, "replacement"), "must not be empty");
    bool prepend = f.bool_or(v, "add_prefix_space", path, true);
    if (const json::Value* s = f.optional(v, "prepend_scheme"))
      prepend = f.string(*s, JsonFields::join(path, "prepend_scheme")) != "never";
    return std::make_unique<Metaspace>(replacement, prepend);
  }
  if (type == "Sequence") {
    const std::string list_path = JsonFields::join(path, "decoders");
    const json::Array& items = f.array(f.member(v, "decoders", path), list_path).as_array();
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < items.size(); ++i) {
      auto d = read_decoder(items[i], JsonFields::index(list_path, i), f);
      if (d) parts.push_back(std::move(d));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  f.fail(JsonFields::join(path, "type"), "unsupported decoder '" + type + "' (supported: ByteLevel, ByteFallback, "
                                          "Replace, Fuse, Strip, Metaspace, Sequence)");
}

}  // namespace attnzoo::tok
