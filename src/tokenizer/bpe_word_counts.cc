#include "tokenizer/bpe_word_counts.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/utf8.h"
#include "loader/json.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pre_tokenizer.h"

namespace attnzoo::tok {
namespace {

// Blocks of this size are read at a time; a line is counted as soon as its end is read.
constexpr size_t kBlockBytes = size_t(1) << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

WordCounter::WordCounter(bool add_prefix_space) {
  // Built from the same description the trained tokenizer.json carries, so training splits text exactly as the
  // written tokenizer will.
  const json::Value v = json::parse(std::string(R"({"type": "ByteLevel", "add_prefix_space": )") +
                                    (add_prefix_space ? "true" : "false") + R"(, "use_regex": true})");
  pre_tokenizer_ = read_pre_tokenizer(v, "pre_tokenizer", JsonFields("BPE trainer"));
}

WordCounter::~WordCounter() = default;

void WordCounter::add_sequence(std::string_view text) {
  require(utf8::is_valid(text), "text", "not valid UTF-8");
  count_words(text);
}

void WordCounter::count_words(std::string_view text) {
  Pieces pieces{Piece{std::string(text), -1, true}};
  pre_tokenizer_->apply(pieces);
  for (Piece& p : pieces) {
    auto it = counts_.find(p.text);
    if (it != counts_.end()) ++it->second;
    else counts_.emplace(std::move(p.text), 1);
  }
}

void WordCounter::add_file(const std::string& path, const std::function<void(uint64_t)>& on_bytes) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw ArgumentError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<char> block(kBlockBytes);
  std::string pending;  // the start of a line that continues in the next block
  uint64_t line = 0;
  auto count_line = [&](std::string_view text) {
    ++line;
    if (!utf8::is_valid(text)) throw ArgumentError(path + ": line " + std::to_string(line) + " is not valid UTF-8");
    count_words(text);
  };
  for (;;) {
    const size_t n = std::fread(block.data(), 1, block.size(), f.get());
    if (n == 0) {
      if (std::ferror(f.get())) throw ArgumentError(path + ": read error (" + std::strerror(errno) + ")");
      break;
    }
    std::string_view data(block.data(), n);
    size_t start = 0;
    for (size_t nl; (nl = data.find('\n', start)) != std::string_view::npos; start = nl + 1) {
      const std::string_view piece = data.substr(start, nl + 1 - start);
      if (pending.empty()) {
        count_line(piece);
      } else {
        pending.append(piece);
        count_line(pending);
        pending.clear();
      }
    }
    pending.append(data.substr(start));
    if (on_bytes) on_bytes(n);
  }
  if (!pending.empty()) count_line(pending);
}

}  // namespace attnzoo::tok
