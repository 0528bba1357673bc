// The statistics `attnzoo tokenize --report` and `attnzoo tokenizer train --report` print.
#include "cli/tokenizer_report.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "loader/text_file.h"

namespace attnzoo::cli {

std::string piece_of(const tok::Tokenizer& t, int32_t id) {
  const int32_t one[1] = {id};
  return t.decode_bytes(one);
}

namespace {

double percentile(std::vector<size_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5));
  return double(v[k]);
}

}  // namespace

int print_tokenizer_report(const tok::Tokenizer& t, const std::string& path) {
  const std::string text = read_text_file("--report", path);
  std::vector<std::string_view> lines;  // views into `text`: a large file is held once
  for (size_t at = 0; at < text.size();) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    std::string_view line(text.data() + at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    at = nl + 1;
  }
  // Piece lengths are per id; cache them so the report costs one decode per distinct token.
  std::vector<int32_t> piece_len;
  auto length_of = [&](int32_t id) -> size_t {
    if (size_t(id) >= piece_len.size()) piece_len.resize(size_t(id) + 1, -1);
    if (piece_len[size_t(id)] < 0) piece_len[size_t(id)] = int32_t(piece_of(t, id).size());
    return size_t(piece_len[size_t(id)]);
  };
  auto is_digits = [&](int32_t id) {
    const std::string p = piece_of(t, id);
    return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
  };

  size_t bytes = 0, tokens = 0, invalid = 0, longest_numeric = 0;
  std::vector<size_t> lengths, failures;
  double seconds = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = lines[n];
    if (!utf8::is_valid(line)) {
      ++invalid;
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = t.encode(line, false);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bytes += line.size();
    tokens += ids.size();
    size_t run = 0;
    for (int32_t id : ids) {
      lengths.push_back(length_of(id));
      run = is_digits(id) ? run + 1 : 0;
      longest_numeric = std::max(longest_numeric, run);
    }
    if (t.decode(ids) != line) failures.push_back(n + 1);
  }
  std::printf("lines                 %zu (%zu not valid UTF-8, skipped)\n", lines.size(), invalid);
  std::printf("bytes                 %zu\n", bytes);
  std::printf("tokens                %zu\n", tokens);
  std::printf("tokens per byte       %.4f\n", bytes ? double(tokens) / double(bytes) : 0.0);
  std::printf("token bytes p50/p95/p99  %.0f / %.0f / %.0f\n", percentile(lengths, 0.50), percentile(lengths, 0.95),
              percentile(lengths, 0.99));
  std::printf("longest numeric run   %zu tokens\n", longest_numeric);
  std::printf("round-trip failures   %zu", failures.size());
  for (size_t k = 0; k < failures.size() && k < 10; ++k) std::printf("%s%zu", k ? ", " : " (lines ", failures[k]);
  std::printf("%s\n", failures.empty() ? "" : failures.size() > 10 ? ", ...)" : ")");
  std::printf("encode                %.0f tokens/s (%.2f MB/s)\n", seconds > 0 ? double(tokens) / seconds : 0.0,
              seconds > 0 ? double(bytes) / seconds / 1e6 : 0.0);
  return 0;
}

}  // namespace attnzoo::cli
