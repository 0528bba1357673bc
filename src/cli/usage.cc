#include "cli/usage.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace attnzoo::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Option names in a usage text: "-x" / "--name-with-dashes", after a space, '[' or '|'.
std::vector<std::string> options_in(const std::string& usage) {
  std::vector<std::string> out;
  for (size_t i = 0; i < usage.size(); ++i) {
    if (usage[i] != '-' || (i > 0 && !std::strchr(" [|\n(", usage[i - 1]))) continue;
    size_t j = i;
    while (j < usage.size() && (usage[j] == '-' || std::isalnum(static_cast<unsigned char>(usage[j])))) ++j;
    const std::string name = usage.substr(i, j - i);
    if (name.size() >= 2 && std::isalpha(static_cast<unsigned char>(name.back())) &&
        std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
    i = j;
  }
  return out;
}

}  // namespace

std::string closest_option(const std::string& given, const std::string& usage) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const std::string& o : options_in(usage)) {
    const size_t d = edit_distance(given, o);
    if (d < best_d) best = o, best_d = d;
  }
  // A typo, not a different word: at most a third of the longer name changed (and at most 3 edits).
  const size_t limit = std::min<size_t>(3, std::max(given.size(), best.size()) / 3);
  return best_d <= limit && best_d > 0 ? best : "";
}

void throw_unknown_option(const std::string& command, const std::string& given, const std::string& usage) {
  const std::string near = closest_option(given, usage);
  throw ArgumentError(command + ": unknown option '" + given + "'" +
                      (near.empty() ? std::string() : " (did you mean " + near + "?)") + "\n" + usage);
}

}  // namespace attnzoo::cli
