// attnzoo tokenize: token ids and pieces of a text, or statistics of a tokenizer over a file's lines.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/tokenizer_report.h"
#include "cli/usage.h"
#include "core/error.h"
#include "core/utf8.h"
#include "loader/json.h"
#include "loader/load_error.h"
#include "tokenizer/tokenizer.h"

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

const char* kUsage =
    "usage: attnzoo tokenize -m DIR TEXT [--no-special] [--json]\n"
    "       attnzoo tokenize -m DIR --report FILE [--json]\n"
    "  token ids and pieces of TEXT (DIR: a model directory or a tokenizer.json); --report: statistics over a\n"
    "  text file, checked by decoding every piece back\n";

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
    else if (is_help(s)) throw HelpRequested(kUsage);
    else if (!s.empty() && s[0] == '-' && s != "-") throw_unknown_option("tokenize", s, kUsage);
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
    const size_t n = c < 0x80 ? 1 : utf8::decode(bytes, i, &cp);
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
std::string json_string(const std::string& bytes) { return json::quote(utf8::lossy(bytes)); }

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

}  // namespace

int run_tokenize(const std::vector<std::string>& args) {
  const TokenizeArgs a = parse_args(args);
  std::error_code ec;
  if (!std::filesystem::exists(a.model, ec)) throw LoadError("model path not found: " + a.model);  // as Model::load
  const auto t = tok::Tokenizer::load(a.model);
  if (!a.report.empty()) return print_tokenizer_report(*t, a.report);
  return print_tokens(*t, a);
}

}  // namespace attnzoo::cli
