// attnzoo tokenize: token ids and pieces of a text, or statistics of a tokenizer over a file's lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "loader/json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace attnzoo::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool have_text = false;
  std::string report;
  bool json = false;
  bool add_special = true;
};

TokenizeArgs parse_args(const std::vector<std::string>& args) {
  TokenizeArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    if (s == "-m" || s == "--model") a.model = value();
    else if (s == "--report") a.report = value();
    else if (s == "--json") a.json = true;
    else if (s == "--no-special") a.add_special = false;
    else if (!s.empty() && s[0] == '-' && s != "-") throw ArgumentError("tokenize: unknown option '" + s + "'");
    else if (a.have_text) throw ArgumentError("tokenize: more than one text given (quote it)");
    else a.text = s, a.have_text = true;
  }
  if (a.model.empty()) throw ArgumentError("tokenize: -m DIR (model directory or tokenizer.json) is required");
  if (a.report.empty() && !a.have_text) throw ArgumentError("tokenize: give a TEXT or --report FILE");
  return a;
}

// Printable ASCII as is; escapes for control characters, backslash and bytes of invalid UTF-8.
std::string escape(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    uint32_t cp = 0;
    const size_t n = c < 0x80 ? 1 : tok::utf8::decode(bytes, i, &cp);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"') out += "\\\"";
    else if (c < 0x20 || c == 0x7F || n == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.append(bytes, i, n);
    }
    i += n ? n : 1;
  }
  return out;
}

// JSON string literal; the text is made valid UTF-8 first.
std::string json_string(const std::string& bytes) { return json::quote(tok::utf8::lossy(bytes)); }

std::string piece_of(const tok::Tokenizer& t, int32_t id) {
  const int32_t one[1] = {id};
  return t.decode_bytes(one);
}

int print_tokens(const tok::Tokenizer& t, const TokenizeArgs& a) {
  const std::vector<int32_t> ids = t.encode(a.text, a.add_special);
  if (a.json) {
    std::string ids_s, pieces_s, tokens_s;
    for (size_t i = 0; i < ids.size(); ++i) {
      const char* sep = i ? ", " : "";
      ids_s += sep + std::to_string(ids[i]);
      pieces_s += sep + json_string(piece_of(t, ids[i]));
      tokens_s += sep + json_string(t.id_to_token(ids[i]).value_or(""));
    }
    std::printf("{\"ids\": [%s], \"pieces\": [%s], \"tokens\": [%s]}\n", ids_s.c_str(), pieces_s.c_str(),
                tokens_s.c_str());
    return 0;
  }
  for (int32_t id : ids) std::printf("%d\t%s\n", id, escape(piece_of(t, id)).c_str());
  return 0;
}

double percentile(std::vector<size_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5));
  return double(v[k]);
}

int print_report(const tok::Tokenizer& t, const TokenizeArgs& a) {
  std::ifstream in(a.report, std::ios::binary);
  if (!in) throw ArgumentError("--report: cannot open '" + a.report + "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
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
    const std::string& line = lines[n];
    if (!tok::utf8::is_valid(line)) {
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

}  // namespace

int run_tokenize(const std::vector<std::string>& args) {
  const TokenizeArgs a = parse_args(args);
  const auto t = tok::Tokenizer::load(a.model);
  if (!a.report.empty()) return print_report(*t, a);
  return print_tokens(*t, a);
}

}  // namespace attnzoo::cli
